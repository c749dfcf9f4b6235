"""What an agent's config amounts to: the servers and tool arguments its claude turns get.

Pure module: no I/O. The harness builds each turn's argv from these functions
(:mod:`hyperhive.agent.launch`), and the operator's views — an approval
about to create or change an agent, ``hivectl perms show`` — show what they
return, so what the operator approves is exactly what the agent will get.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import tomli_w

from hyperhive.config import DEFAULT_MCP_SERVERS, AgentConfig, McpServer
from hyperhive.permissions import (
    BASH_SERVER,
    HYPERHIVE_SERVER,
    Capability,
    ToolGroup,
    allowed_tools_arg,
    builtin_tools_arg,
)

__all__ = [
    "EffectiveConfig",
    "ToolArgs",
    "effective_config",
    "effective_toml",
    "turn_servers",
    "turn_tool_args",
]


def turn_servers(config: AgentConfig, groups: Sequence[ToolGroup]) -> dict[str, McpServer]:
    """The agent's extra servers a turn gets: enabled ones, ``bash`` only with ``execution``.

    ``bash`` is dropped rather than left for the server-side gate to refuse:
    tools that can never succeed only cost context and invite failed calls.
    """
    servers = config.servers()
    if ToolGroup.EXECUTION not in groups:
        servers.pop(BASH_SERVER, None)
    return servers


def _extra_allowed(servers: Mapping[str, McpServer]) -> dict[str, list[str]]:
    return {name: list(s.allowed_tools) for name, s in servers.items() if s.allowed_tools}


@dataclass(frozen=True, slots=True)
class ToolArgs:
    """The values of claude's ``--tools`` and ``--allowedTools`` for a turn."""

    tools: str
    allowed_tools: str


def turn_tool_args(
    config: AgentConfig,
    groups: Sequence[ToolGroup] | None = None,
    capabilities: Sequence[Capability] | None = None,
) -> ToolArgs:
    """``--tools`` / ``--allowedTools`` of a turn; groups and capabilities: the config's."""
    groups = list(config.tool_groups if groups is None else groups)
    caps = list(config.capabilities if capabilities is None else capabilities)
    return ToolArgs(
        builtin_tools_arg(groups),
        allowed_tools_arg(groups, caps, _extra_allowed(turn_servers(config, groups))),
    )


def effective_toml(config: AgentConfig) -> str:
    """The whole ``agent.toml`` in effect: every default written out, the default MCP
    servers merged under the file's own (a disabled one stays listed, ``enabled = false``).
    An unset ``model`` is left out: claude's (or ``hive.toml``'s ``default_model``) applies.
    """
    data: dict[str, Any] = config.model_dump(mode="json", exclude_none=True)
    merged = {**DEFAULT_MCP_SERVERS, **config.mcp_servers}
    data["mcp_servers"] = {
        name: server.model_dump(mode="json", exclude_none=True) for name, server in merged.items()
    }
    return tomli_w.dumps(data)


@dataclass(frozen=True)
class EffectiveConfig:
    """An agent as a config would make it: what the operator sees before approving."""

    agent: str
    parent: str | None
    toml: str
    tool_groups: list[str]
    capabilities: list[str]
    mcp_servers: list[str]
    tools_arg: str
    allowed_tools_arg: str

    def as_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "parent": self.parent,
            "toml": self.toml,
            "tool_groups": self.tool_groups,
            "capabilities": self.capabilities,
            "mcp_servers": self.mcp_servers,
            "tools_arg": self.tools_arg,
            "allowed_tools_arg": self.allowed_tools_arg,
        }


def effective_config(agent: str, parent: str | None, config: AgentConfig) -> EffectiveConfig:
    """``agent`` under ``parent`` (None: a root) with ``config`` applied."""
    args = turn_tool_args(config)
    return EffectiveConfig(
        agent=agent,
        parent=parent,
        toml=effective_toml(config),
        tool_groups=[g.value for g in config.tool_groups],
        capabilities=[c.value for c in config.capabilities],
        mcp_servers=[HYPERHIVE_SERVER, *sorted(turn_servers(config, config.tool_groups))],
        tools_arg=args.tools,
        allowed_tools_arg=args.allowed_tools,
    )
