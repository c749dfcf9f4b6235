"""Name rules shared by agents, bash tasks and subagents.

An agent name is used as a path component, a DNS label (Kubernetes, hosts),
a socket file name and, prefixed with ``hh-``, a system user name — whose
32-character limit is the binding one. Task and subagent names follow spec
001: ``[a-z0-9-]``, at most 63.
"""

from __future__ import annotations

import re

from hyperhive.errors import InvalidName

__all__ = [
    "AGENT_NAME_MAX",
    "OPERATOR",
    "PARENT_SENTINEL",
    "RESERVED_NAMES",
    "SYSTEM_USER_PREFIX",
    "TASK_NAME_MAX",
    "system_user",
    "validate_agent_name",
    "validate_task_name",
]

OPERATOR = "operator"
SYSTEM = "system"
REMINDER = "reminder"
GRACEFUL_STOP = "graceful-stop"
PARENT_SENTINEL = "<parent>"
RESERVED_NAMES = frozenset({OPERATOR, SYSTEM, REMINDER, GRACEFUL_STOP, PARENT_SENTINEL})

SYSTEM_USER_PREFIX = "hh-"
AGENT_NAME_MAX = 32 - len(SYSTEM_USER_PREFIX)
TASK_NAME_MAX = 63

_AGENT_RE = re.compile(r"[a-z](?:[a-z0-9-]*[a-z0-9])?")
_TASK_RE = re.compile(r"[a-z0-9-]+")


def validate_agent_name(name: str) -> str:
    """Return ``name`` if it is a usable agent name, else raise ``InvalidName``."""
    if name in RESERVED_NAMES:
        raise InvalidName(f"{name!r} is reserved; choose another agent name")
    if not 1 <= len(name) <= AGENT_NAME_MAX:
        raise InvalidName(
            f"agent name {name!r} must be 1 to {AGENT_NAME_MAX} characters "
            f"(it becomes the system user {SYSTEM_USER_PREFIX}<name>)"
        )
    if not _AGENT_RE.fullmatch(name) or "--" in name:
        raise InvalidName(
            f"agent name {name!r} must be lowercase letters, digits and single hyphens, "
            "start with a letter and not end with a hyphen"
        )
    return name


def validate_task_name(name: str) -> str:
    """Return ``name`` if it is a valid task/subagent name (``[a-z0-9-]``, ≤ 63)."""
    if not 1 <= len(name) <= TASK_NAME_MAX or not _TASK_RE.fullmatch(name):
        raise InvalidName(
            f"name {name!r} must be 1 to {TASK_NAME_MAX} of [a-z0-9-] "
            "(lowercase letters, digits, hyphen)"
        )
    return name


def system_user(agent: str) -> str:
    """The system user an agent's sandboxed processes run as."""
    return SYSTEM_USER_PREFIX + validate_agent_name(agent)
