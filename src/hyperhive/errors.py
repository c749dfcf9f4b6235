"""The hyperhive exception tree.

Every error carries a stable ``code`` (what crosses the wire as
``{ok: false, error: {code, message}}``) and a message a person can act on.
They are translated at the edges: the CLI prints the message and exits with
its class's code (``hyperhive.cli.exits``), HTTP maps them to a status, MCP
tools return an error result.

    HiveError
    ├── InvalidRequest            bad input from a client
    │   ├── MalformedFrame        not JSON / not an object / fails the schema
    │   ├── FrameTooLarge         over the frame-size cap
    │   ├── UnknownCommand        a ``cmd`` this socket does not speak
    │   ├── InvalidName           not a valid agent / task name
    │   └── LimitExceeded         body too long, too many reminders, …
    ├── NotFound                  unknown agent, message, row, task
    ├── PermissionDenied          the caller may not do this
    │   ├── ToolGroupDenied       the agent lacks the tool group
    │   ├── RouteRefused          messaging topology refused a recipient
    │   └── OverBudget            a spend limit holds the agent: it takes no turn
    ├── Conflict                  the state forbids it now (name in use, …)
    ├── TopologyError             a refused reparent
    │   ├── UnknownChild / UnknownParent
    │   ├── SelfParent
    │   └── CycleRefused
    ├── ConfigError               a bad config file (file, line, what)
    │   └── InstallProblem        claude or Python missing, or out of the agents' reach
    ├── StorageError              the disk said no (full, read-only, corrupt)
    ├── Unavailable               the peer (coordinator, host) is not there
    │   └── NotListening          its socket is there, nobody answers (a restart, a failover)
    ├── TimedOut                  what a command waited for did not come in time
    └── InternalError             a bug: what failed and the exception's text
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "ConfigError",
    "Conflict",
    "CycleRefused",
    "FrameTooLarge",
    "HiveError",
    "InstallProblem",
    "InternalError",
    "NotListening",
    "InvalidName",
    "InvalidRequest",
    "LimitExceeded",
    "MalformedFrame",
    "NotFound",
    "OverBudget",
    "PermissionDenied",
    "RouteRefused",
    "SelfParent",
    "StorageError",
    "TimedOut",
    "ToolGroupDenied",
    "TopologyError",
    "Unavailable",
    "UnknownChild",
    "UnknownCommand",
    "UnknownParent",
    "error_from_code",
]


class HiveError(Exception):
    """Base of every hyperhive error; ``code`` is stable across releases."""

    code: ClassVar[str] = "hive_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        # Set by the framing layer when the failing frame had a readable id.
        self.request_id: int | str | None = None


class InvalidRequest(HiveError):
    code = "invalid_request"


class MalformedFrame(InvalidRequest):
    code = "malformed_frame"


class FrameTooLarge(InvalidRequest):
    code = "frame_too_large"


class UnknownCommand(InvalidRequest):
    code = "unknown_command"


class InvalidName(InvalidRequest):
    code = "invalid_name"


class LimitExceeded(InvalidRequest):
    code = "limit_exceeded"


class NotFound(HiveError):
    code = "not_found"


class PermissionDenied(HiveError):
    code = "permission_denied"


class ToolGroupDenied(PermissionDenied):
    code = "tool_group_denied"


class RouteRefused(PermissionDenied):
    code = "route_refused"


class OverBudget(PermissionDenied):
    """A spend limit holds the agent: it takes no turn until the limit is raised."""

    code = "over_budget"


class Conflict(HiveError):
    code = "conflict"


class TopologyError(HiveError):
    code = "topology_error"


class UnknownChild(TopologyError):
    code = "unknown_child"


class UnknownParent(TopologyError):
    code = "unknown_parent"


class SelfParent(TopologyError):
    code = "self_parent"


class CycleRefused(TopologyError):
    code = "cycle_refused"


class ConfigError(HiveError):
    """A config file that cannot be used; the message names file and line."""

    code = "config_error"

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(f"{where}{message}")
        self.path = path
        self.line = line


class InstallProblem(ConfigError):
    """What the agents must run (claude, the Python) is missing or out of their reach;
    the message says where to install instead."""

    code = "install_problem"


class StorageError(HiveError):
    code = "storage_error"


class Unavailable(HiveError):
    code = "unavailable"


class NotListening(Unavailable):
    """A socket file with no server behind it: nothing was sent, so a retry is safe."""

    code = "not_listening"


class TimedOut(HiveError):
    """A wait the caller asked for (a reply, a stop) ended before what it waited for came."""

    code = "timed_out"


class InternalError(HiveError):
    """An unexpected exception, reported with what failed and its text (never bare)."""

    code = "internal_error"


def _all_subclasses(cls: type[HiveError]) -> list[type[HiveError]]:
    out = [cls]
    for sub in cls.__subclasses__():
        out.extend(_all_subclasses(sub))
    return out


def error_from_code(code: str, message: str) -> HiveError:
    """Rebuild the typed error a peer sent (unknown codes become ``HiveError``)."""
    for cls in _all_subclasses(HiveError):
        if cls.code == code:
            return cls(message)
    return HiveError(message)
