"""Tool groups and capabilities: the names an agent's permissions are made of.

Pure module. The tools each one grants are read from the declarations
(:func:`hyperhive.permissions.group_tools`); this module only names them and
parses their lists, so the declarations can name their group without
importing the table that reads them.
"""

from __future__ import annotations

import logging
from enum import StrEnum
from typing import ClassVar, TypeVar

__all__ = ["CAPABILITIES_ENV", "TOOL_GROUPS_ENV", "Capability", "ToolGroup"]

log = logging.getLogger("hyperhive.permissions")

TOOL_GROUPS_ENV = "HIVE_TOOL_GROUPS"
CAPABILITIES_ENV = "HIVE_CAPABILITIES"


class ToolGroup(StrEnum):
    """A named set of tools an agent may be granted (``docs/tools.md`` lists them)."""

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


class Capability(StrEnum):
    """A single privilege orthogonal to tool groups.

    ``read_host_journal`` unlocks ``get_host_journal``; ``query_agent_state``
    lets ``get_loose_ends(agent=…)`` read an agent that is not a descendant;
    ``meta_read`` unlocks ``get_deployed`` (a descendant's applied config and
    its deploy log).
    """

    READ_HOST_JOURNAL = "read_host_journal"
    QUERY_AGENT_STATE = "query_agent_state"
    META_READ = "meta_read"

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
