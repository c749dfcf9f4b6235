"""``python -m bench._http_floor KIND PORT_FILE``: a bare HTTP floor for the MCP surface.

``json``: one Starlette route answering a JSON body with a JSON body.
``mcp``: the official SDK's low-level server with one trivial tool, behind
the same streamable-HTTP manager mode the host uses (stateful,
``json_response=True``) — what the hyperhive surface costs beyond the SDK.
``mcp-like-host``: the same, on a listener made exactly as the agent host
makes its own (``socket.socket(AF_INET, SOCK_STREAM)``: proto 0, so asyncio
never sets ``TCP_NODELAY`` on its connections).
All on uvicorn, in their own process like the agent host; the chosen port
is written to PORT_FILE once listening.
"""

from __future__ import annotations

import contextlib
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

TOOL = types.Tool(name="ping", description="Answers pong.", input_schema={"type": "object"})


def json_app() -> Starlette:
    async def rpc(request: Request) -> Response:
        body = await request.json()
        return JSONResponse({"jsonrpc": "2.0", "id": body.get("id"), "result": {"text": "pong"}})

    return Starlette(routes=[Route("/rpc", rpc, methods=["POST"])])


def mcp_app() -> Starlette:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[TOOL])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text="pong")])

    server: Server[Any] = Server("floor", on_list_tools=list_tools, on_call_tool=call_tool)
    manager = StreamableHTTPSessionManager(app=server, json_response=True)

    class Endpoint:
        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            await manager.handle_request(scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    endpoint: Any = Endpoint()
    return Starlette(
        routes=[Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"])], lifespan=lifespan
    )


def main(kind: str, port_file: Path) -> None:
    app = {"json": json_app, "mcp": mcp_app, "mcp-like-host": mcp_app}[kind]()
    # With proto IPPROTO_TCP asyncio sets TCP_NODELAY on every accepted
    # connection, as uvicorn's own binding does; without, a keep-alive client
    # waits out its delayed ACK (~40 ms) for the second segment of each response.
    proto = 0 if kind == "mcp-like-host" else socket.IPPROTO_TCP
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(512)
    port_file.write_text(str(sock.getsockname()[1]))
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
