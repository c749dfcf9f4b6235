"""Name rules shared by agents, bash tasks and subagents.

An agent name is used as a path component, a DNS label (Kubernetes, hosts),
a socket file name and, with its hive's id, a system user name
(``hh-<hive id>-<name>``, hashed to fit the 32-character limit). Task and
subagent names follow spec 001: ``[a-z0-9-]``, at most 63.
"""

from __future__ import annotations

import hashlib
import re

from hyperhive.errors import InvalidName

__all__ = [
    "AGENT_NAME_MAX",
    "HIVE_ID_LENGTH",
    "OPERATOR",
    "PARENT_SENTINEL",
    "RESERVED_NAMES",
    "SYSTEM_USER_PREFIX",
    "TASK_NAME_MAX",
    "USER_NAME_MAX",
    "legacy_system_user",
    "listed",
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
USER_NAME_MAX = 32  # useradd's limit
HIVE_ID_LENGTH = 6
# Unchanged from when the user was hh-<name>: every existing name stays valid.
AGENT_NAME_MAX = USER_NAME_MAX - len(SYSTEM_USER_PREFIX)
_HIVE_ID_RE = re.compile(rf"[a-z0-9]{{{HIVE_ID_LENGTH}}}")
_HASH_CHARS = 8
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
            "(it is part of a system user name)"
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


def system_user(hive_id: str, agent: str) -> str:
    """The system user an agent of hive ``hive_id`` runs as: ``hh-<hive id>-<agent>``.

    Past 32 characters the agent part is cut and a hash of the whole name
    appended, so two long names never share a user; the queens of two hives
    are two users.
    """
    if not _HIVE_ID_RE.fullmatch(hive_id):
        raise InvalidName(f"hive id {hive_id!r} must be {HIVE_ID_LENGTH} of [a-z0-9]")
    prefix = f"{SYSTEM_USER_PREFIX}{hive_id}-"
    name = prefix + validate_agent_name(agent)
    if len(name) <= USER_NAME_MAX:
        return name
    digest = hashlib.sha256(agent.encode()).hexdigest()[:_HASH_CHARS]
    keep = USER_NAME_MAX - len(prefix) - 1 - _HASH_CHARS
    return f"{prefix}{agent[:keep].rstrip('-')}-{digest}"


def legacy_system_user(agent: str) -> str:
    """The user name before hive ids (``hh-<agent>``): shared by every hive on a machine."""
    return SYSTEM_USER_PREFIX + validate_agent_name(agent)


def listed(names: list[str], shown: int = 20, empty: str = "(none)") -> str:
    """``a, b, c`` for a log line or notice; past ``shown`` names, how many more.

    A host with a thousand agents must not make a line of a thousand names.
    """
    if not names:
        return empty
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more
