"""A tiny stdio MCP server (one ``echo`` tool) to stand in for an agent's extra server.

Run as a script: ``python tests/support/echo_mcp.py``. It imports nothing of
hyperhive, so claude can spawn it with only the interpreter's path.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("echo")


@server.tool()
def echo(text: str) -> str:
    """Return ``text`` unchanged."""
    return text


if __name__ == "__main__":
    server.run("stdio")
