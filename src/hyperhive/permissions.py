"""Tool groups, capabilities and the claude tool lists they resolve to.

Pure module: no I/O besides one warning log. This is the one home of tool
resolution — the harness, the MCP surfaces (server-side gates), the subagent
surface and the dashboard all read the same functions, so a subagent can never
be handed a built-in its parent lacks and a gate can never disagree with what
claude was offered.

The tools each group and capability grants are read from the declarations
(:mod:`hyperhive.tools.catalog`); ``docs/tools.md`` is the reference table,
generated from the same declarations (``python -m hyperhive.tools.doc``).
A tool reaches claude as ``mcp__<server>__<tool>``. ``web_tools`` grants no
MCP tool, only the built-ins WebFetch and WebSearch; ``compact`` is in no
group (always on). Capabilities are orthogonal to groups:
``read_host_journal`` unlocks ``get_host_journal``; ``query_agent_state``
lets ``get_loose_ends(agent=…)`` read an agent that is not a descendant.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from hyperhive.tools.catalog import CATALOG
from hyperhive.tools.decl import (
    BASH_SERVER,
    HYPERHIVE_SERVER,
    SUBAGENT_CONTROL_SERVER,
    SUBAGENT_SERVER,
    McpTool,
    Tool,
)
from hyperhive.tools.groups import CAPABILITIES_ENV, TOOL_GROUPS_ENV, Capability, ToolGroup

__all__ = [
    "ALLOWED_BUILTIN_TOOLS",
    "ALWAYS_ON_TOOLS",
    "BASH_SERVER",
    "CAPABILITIES_ENV",
    "GROUP_GATED_SERVERS",
    "HYPERHIVE_SERVER",
    "SUBAGENT_CONTROL_SERVER",
    "SUBAGENT_SERVER",
    "TOOL_GROUPS_ENV",
    "Capability",
    "McpTool",
    "ToolGroup",
    "allowed_tools_arg",
    "builtin_tools_arg",
    "builtin_tools_for",
    "capability_tools",
    "declaration",
    "effective_capabilities",
    "effective_tool_groups",
    "granted_mcp_tools",
    "group_for_tool",
    "group_tools",
]

# Built-ins present in every session; anything else does not exist in it.
# No Bash: shell work goes through mcp__bash__run (tracked background tasks).
# No Task/Agent: nested agents go through the subagent surface, under our gates.
# No TodoWrite: claude's todo list evaporates on /compact; plan in /state notes.
# Skill: without it an installed plugin's SKILL.md can never be triggered.
ALLOWED_BUILTIN_TOOLS: tuple[str, ...] = ("Edit", "Glob", "Grep", "Read", "Skill", "Write")


# The host's surfaces whose tools the groups govern. ``subagent`` is default-on and
# in no group (spec 000); ``subagent_control`` is a subagent's own, never an agent's.
GROUP_GATED_SERVERS: tuple[str, ...] = (HYPERHIVE_SERVER, BASH_SERVER)

_GATED: tuple[Tool[Any, Any], ...] = tuple(t for t in CATALOG if t.server in GROUP_GATED_SERVERS)

# In no group: an agent can always ask for its own context to be compacted.
ALWAYS_ON_TOOLS: tuple[McpTool, ...] = tuple(
    t.mcp for t in _GATED if t.group is None and t.capability is None
)


def group_tools(group: ToolGroup) -> tuple[McpTool, ...]:
    """The MCP tools ``group`` grants, as declared (empty for ``web_tools``)."""
    return tuple(t.mcp for t in _GATED if t.group is group)


def capability_tools(capability: Capability) -> tuple[McpTool, ...]:
    """The MCP tools ``capability`` unlocks, as declared."""
    return tuple(t.mcp for t in _GATED if t.capability is capability)


_BY_NAME: dict[tuple[str, str], Tool[Any, Any]] = {}
for _tool in CATALOG:
    _BY_NAME.setdefault((_tool.server, _tool.name), _tool)  # the first wins, as the scan did


def declaration(server: str, name: str) -> Tool[Any, Any] | None:
    """The declaration of ``server``'s tool ``name`` (None: no such tool)."""
    return _BY_NAME.get((server, name))  # every request is gated by this: a dict, not a scan


def effective_tool_groups(env: Mapping[str, str] | None = None) -> list[ToolGroup]:
    """The tool groups ``env`` (default ``os.environ``) grants."""
    source = os.environ if env is None else env
    return ToolGroup.parse_list(source.get(TOOL_GROUPS_ENV, ""))


def effective_capabilities(env: Mapping[str, str] | None = None) -> list[Capability]:
    """The capabilities ``env`` (default ``os.environ``) grants."""
    source = os.environ if env is None else env
    return Capability.parse_list(source.get(CAPABILITIES_ENV, ""))


def builtin_tools_for(groups: Iterable[ToolGroup]) -> list[str]:
    """The base built-ins, then each group's additions; de-duplicated, stable."""
    tools = list(ALLOWED_BUILTIN_TOOLS)
    for group in groups:
        for tool in group.builtin_tools():
            if tool not in tools:
                tools.append(tool)
    return tools


def builtin_tools_arg(groups: Iterable[ToolGroup]) -> str:
    """The value of claude's ``--tools``: which built-ins exist at all.

    Never empty, and not because of what an empty value does but because we
    do not know: whether ``--tools ""`` means "no tools" or "flag unset" is a
    property of the installed claude release. So an empty resolution is
    refused rather than relied on. ``--tools`` governs built-ins only; MCP
    tools are governed by ``--strict-mcp-config`` and the MCP config.
    """
    tools = builtin_tools_for(groups)
    if not tools:
        raise ValueError(
            "resolved an empty --tools value; refusing: what an empty --tools grants "
            "depends on the claude release, so it is never emitted"
        )
    return ",".join(tools)


def granted_mcp_tools(
    groups: Iterable[ToolGroup], capabilities: Iterable[Capability] = ()
) -> list[McpTool]:
    """Every MCP tool the groups and capabilities grant, plus the always-on ones."""
    out: list[McpTool] = []
    for group in groups:
        out.extend(t for t in group_tools(group) if t not in out)
    out.extend(t for t in ALWAYS_ON_TOOLS if t not in out)
    for cap in capabilities:
        out.extend(t for t in capability_tools(cap) if t not in out)
    return out


def group_for_tool(server: str, name: str) -> ToolGroup | None:
    """The group that grants ``server``'s tool ``name`` (None: always on or unknown)."""
    tool = declaration(server, name)
    return tool.group if tool is not None else None


def allowed_tools_arg(
    groups: Sequence[ToolGroup],
    capabilities: Sequence[Capability] = (),
    extra_servers: Mapping[str, Sequence[str]] | None = None,
    *,
    hosted: Collection[str] | None = None,
) -> str:
    """The value of claude's ``--allowedTools``.

    Built-ins from :func:`builtin_tools_for` (a tool that exists is never one
    claude must prompt about), then the granted MCP tools, then
    ``mcp__<server>__*`` for every extra server whose ``allowed_tools`` is
    ``["*"]`` (or its named tools otherwise). ``hosted`` names the host's own
    servers the turn really gets (None: all): a granted tool of a server the
    agent's config turned off is left out, since nothing would serve it.
    """
    names = builtin_tools_for(groups)
    names.extend(
        t.qualified
        for t in granted_mcp_tools(groups, capabilities)
        if hosted is None or t.server in hosted
    )
    for server, allowed in (extra_servers or {}).items():
        if list(allowed) == ["*"]:
            names.append(f"mcp__{server}__*")
        else:
            names.extend(f"mcp__{server}__{tool}" for tool in allowed)
    deduped: list[str] = []
    for name in names:
        if name not in deduped:
            deduped.append(name)
    return ",".join(deduped)
