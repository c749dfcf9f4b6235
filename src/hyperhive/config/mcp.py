"""An agent's MCP server entries (``[mcp_servers.<name>]``) and the built-in ones."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import Field, field_validator

from hyperhive.config.fields import Strict
from hyperhive.permissions import BASH_SERVER, SUBAGENT_SERVER, ToolGroup

__all__ = ["DEFAULT_MCP_SERVERS", "MATRIX_MCP_SERVER", "McpServer", "allowed_by_server"]


class McpServer(Strict):
    """An MCP server entry in an agent's config (``[mcp_servers.<name>]``).

    ``builtin`` entries (the default ``bash`` and ``subagent``) are served by
    the agent host itself; their URL is filled in per agent at launch time.
    ``allowed_tools`` defaults to every tool of the server (``["*"]``): a turn
    runs under ``--print``, where a tool missing from ``--allowedTools`` is
    refused, so a declared server whose tools were not allowed would be dead
    weight. ``tool_group`` offers the server only to agents holding that group.
    """

    type: Literal["stdio", "http"] = Field(
        default="stdio",
        description="`stdio`: a command claude starts; `http`: a server claude reaches at `url`.",
    )
    command: str | None = Field(default=None, description="The command of a `stdio` server.")
    args: list[str] = Field(default_factory=list, description="Its arguments.")
    env: dict[str, str] = Field(default_factory=dict, description="Its environment variables.")
    url: str | None = Field(default=None, description="The http(s) URL of an `http` server.")
    headers: dict[str, str] = Field(
        default_factory=dict, description="HTTP headers sent to an `http` server."
    )
    allowed_tools: list[str] = Field(
        default_factory=lambda: ["*"],
        description="The server's tools claude may call (`*`: all). Under `--print` claude "
        "refuses a tool that is not allowed, so list names only to narrow it.",
    )
    tool_group: ToolGroup | None = Field(
        default=None,
        description="Offer the server only to agents holding this tool group; unset: to all.",
    )
    available_to_subagents: bool = Field(
        default=False, description="Share the server with the agent's subagents too."
    )
    enabled: bool = Field(
        default=True, description="`false` removes a server, the built-in `bash` or `subagent` too."
    )
    builtin: bool = Field(
        default=False,
        description="Served by the agent host itself (the defaults `bash` and `subagent`); "
        "its URL is filled in per agent.",
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"https?://", v):
            raise ValueError("url must start with http:// or https://")
        return v


# Present unless the agent's file overrides or disables them (the spec's
# lib.mkDefault). bash's tools are granted by the execution group, not by "*".
DEFAULT_MCP_SERVERS: dict[str, McpServer] = {
    BASH_SERVER: McpServer(type="http", builtin=True, allowed_tools=[]),
    SUBAGENT_SERVER: McpServer(type="http", builtin=True, allowed_tools=["*"]),
}


# Offered only to an agent whose agent.toml enables [matrix]; every tool of it allowed.
MATRIX_MCP_SERVER = McpServer(type="http", builtin=True, allowed_tools=["*"])


def allowed_by_server(servers: Mapping[str, McpServer]) -> dict[str, list[str]]:
    """``{server: allowed_tools}`` for :func:`~hyperhive.permissions.allowed_tools_arg`."""
    return {name: list(s.allowed_tools) for name, s in servers.items() if s.allowed_tools}
