"""Tool groups, capabilities and the claude tool lists they resolve to.

Pure module: no I/O besides one warning log. This is the one home of tool
resolution — the harness, the MCP surfaces (server-side gates), the subagent
surface and the dashboard all read the same functions, so a subagent can never
be handed a built-in its parent lacks and a gate can never disagree with what
claude was offered.

Reference table (what each group grants; server = the MCP server name, so the
tool reaches claude as ``mcp__<server>__<tool>``):

=============  =========  ===================================================
group          server     tools
=============  =========  ===================================================
messaging      hyperhive  send, recv, ack_until, ask_operator
meta           hyperhive  set_status, get_agent_meta
inbox          hyperhive  get_loose_ends, cancel_loose_end, remind
execution      bash       run, status, kill
lifecycle      hyperhive  request_init_config, kill, start, restart, update,
                          destroy
approvals      hyperhive  request_apply_commit
scheduling     hyperhive  schedule_prompt, list_schedules, cancel_schedule
diagnostics    hyperhive  get_logs
forge          hyperhive  create_repo
web_tools      (none)     built-ins WebFetch, WebSearch
(always on)    hyperhive  compact
=============  =========  ===================================================

Capabilities are orthogonal to groups: ``read_host_journal`` unlocks
``get_host_journal``; ``query_agent_state`` lets ``get_loose_ends(agent=…)``
read an agent that is not a descendant.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, TypeVar

__all__ = [
    "ALLOWED_BUILTIN_TOOLS",
    "ALWAYS_ON_TOOLS",
    "CAPABILITIES_ENV",
    "HYPERHIVE_SERVER",
    "BASH_SERVER",
    "TOOL_GROUPS_ENV",
    "Capability",
    "McpTool",
    "ToolGroup",
    "allowed_tools_arg",
    "builtin_tools_arg",
    "builtin_tools_for",
    "effective_capabilities",
    "effective_tool_groups",
    "granted_mcp_tools",
    "group_for_tool",
]

log = logging.getLogger(__name__)

TOOL_GROUPS_ENV = "HIVE_TOOL_GROUPS"
CAPABILITIES_ENV = "HIVE_CAPABILITIES"
HYPERHIVE_SERVER = "hyperhive"
BASH_SERVER = "bash"

# Built-ins present in every session; anything else does not exist in it.
# No Bash: shell work goes through mcp__bash__run (tracked background tasks).
# No Task/Agent: nested agents go through the subagent surface, under our gates.
# No TodoWrite: claude's todo list evaporates on /compact; plan in /state notes.
# Skill: without it an installed plugin's SKILL.md can never be triggered.
ALLOWED_BUILTIN_TOOLS: tuple[str, ...] = ("Edit", "Glob", "Grep", "Read", "Skill", "Write")


@dataclass(frozen=True, slots=True)
class McpTool:
    """An MCP tool and the server that serves it."""

    server: str
    name: str

    @property
    def qualified(self) -> str:
        """The name claude sees: ``mcp__<server>__<name>``."""
        return f"mcp__{self.server}__{self.name}"


def _hh(*names: str) -> tuple[McpTool, ...]:
    return tuple(McpTool(HYPERHIVE_SERVER, n) for n in names)


class ToolGroup(StrEnum):
    """A named set of tools an agent may be granted (see the module table)."""

    MESSAGING = "messaging"
    META = "meta"
    INBOX = "inbox"
    LIFECYCLE = "lifecycle"
    APPROVALS = "approvals"
    SCHEDULING = "scheduling"
    DIAGNOSTICS = "diagnostics"
    EXECUTION = "execution"
    WEB_TOOLS = "web_tools"
    FORGE = "forge"

    ALL: ClassVar[tuple[ToolGroup, ...]]
    AGENT_DEFAULT: ClassVar[tuple[ToolGroup, ...]]
    MANAGER_DEFAULT: ClassVar[tuple[ToolGroup, ...]]

    def tools(self) -> tuple[McpTool, ...]:
        """The MCP tools this group grants (empty for ``web_tools``)."""
        return _GROUP_TOOLS[self]

    def builtin_tools(self) -> tuple[str, ...]:
        """The claude built-ins this group adds to the base set."""
        return ("WebFetch", "WebSearch") if self is ToolGroup.WEB_TOOLS else ()

    @classmethod
    def parse_list(cls, raw: str) -> list[ToolGroup]:
        """Parse a comma-separated ``HIVE_TOOL_GROUPS`` value.

        Tokens are trimmed and lowercased; an unknown one is warned about and
        skipped, so one stale name cannot take an agent's whole tool surface
        away. Blank or all-unknown gives ``AGENT_DEFAULT``: "no groups
        granted" and "variable missing" are indistinguishable here, and
        neither may mean "no tools".
        """
        groups = _parse_tokens(cls, raw, TOOL_GROUPS_ENV)
        if not groups:
            if raw.strip():
                log.warning(
                    "%s=%r names no known tool group; falling back to AGENT_DEFAULT",
                    TOOL_GROUPS_ENV,
                    raw,
                )
            return list(cls.AGENT_DEFAULT)
        return groups


ToolGroup.ALL = tuple(ToolGroup)
ToolGroup.AGENT_DEFAULT = (
    ToolGroup.MESSAGING,
    ToolGroup.META,
    ToolGroup.INBOX,
    ToolGroup.EXECUTION,
)
ToolGroup.MANAGER_DEFAULT = (
    *ToolGroup.AGENT_DEFAULT,
    ToolGroup.LIFECYCLE,
    ToolGroup.APPROVALS,
    ToolGroup.SCHEDULING,
    ToolGroup.DIAGNOSTICS,
)

_GROUP_TOOLS: dict[ToolGroup, tuple[McpTool, ...]] = {
    ToolGroup.MESSAGING: _hh("send", "recv", "ack_until", "ask_operator"),
    ToolGroup.META: _hh("set_status", "get_agent_meta"),
    ToolGroup.INBOX: _hh("get_loose_ends", "cancel_loose_end", "remind"),
    ToolGroup.EXECUTION: tuple(McpTool(BASH_SERVER, n) for n in ("run", "status", "kill")),
    ToolGroup.LIFECYCLE: _hh(
        "request_init_config",
        "kill",
        "start",
        "restart",
        "update",
        "destroy",
    ),
    ToolGroup.APPROVALS: _hh("request_apply_commit"),
    ToolGroup.SCHEDULING: _hh("schedule_prompt", "list_schedules", "cancel_schedule"),
    ToolGroup.DIAGNOSTICS: _hh("get_logs"),
    ToolGroup.FORGE: _hh("create_repo"),
    ToolGroup.WEB_TOOLS: (),
}

# In no group: an agent can always ask for its own context to be compacted.
ALWAYS_ON_TOOLS: tuple[McpTool, ...] = _hh("compact")


class Capability(StrEnum):
    """A single privilege orthogonal to tool groups."""

    READ_HOST_JOURNAL = "read_host_journal"
    QUERY_AGENT_STATE = "query_agent_state"

    def tools(self) -> tuple[McpTool, ...]:
        """The MCP tools this capability unlocks."""
        if self is Capability.READ_HOST_JOURNAL:
            return _hh("get_host_journal")
        return ()

    @classmethod
    def parse_list(cls, raw: str) -> list[Capability]:
        """Parse ``HIVE_CAPABILITIES``; unknown tokens are warned and skipped.

        Unlike tool groups, blank means no capabilities: they only ever widen.
        """
        return _parse_tokens(cls, raw, CAPABILITIES_ENV)


_E = TypeVar("_E", bound=StrEnum)


def _parse_tokens(enum: type[_E], raw: str, var: str) -> list[_E]:
    out: list[_E] = []
    for token in raw.split(","):
        token = token.strip().lower()
        if not token:
            continue
        try:
            value = enum(token)
        except ValueError:
            log.warning("%s: unknown name %r, skipping", var, token)
            continue
        if value not in out:
            out.append(value)
    return out


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
        out.extend(t for t in group.tools() if t not in out)
    out.extend(t for t in ALWAYS_ON_TOOLS if t not in out)
    for cap in capabilities:
        out.extend(t for t in cap.tools() if t not in out)
    return out


def group_for_tool(server: str, name: str) -> ToolGroup | None:
    """The group that grants ``server``'s tool ``name`` (None: always on or unknown)."""
    for group in ToolGroup.ALL:
        if McpTool(server, name) in group.tools():
            return group
    return None


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
