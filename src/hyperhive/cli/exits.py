"""``hivectl``'s exit codes: one per class of outcome, the same for every command.

A script branches on the class, never on a message's words:

====  ============  ===========================================================
code  class         when
====  ============  ===========================================================
0     ok            the command did what it was asked
1     error         anything else: a bug, a bad config file, the disk
2     usage         bad arguments or input (click's usage errors, a bad name,
                    a body over the limit, an unknown tool group)
3     unreachable   the hive is not running or cannot be reached, or a part
                    the command needs is away (an agent host, the dashboard)
4     not found     no such agent, message, approval, question, host
5     refused       the hive's rules or its state forbid it: topology (a
                    cycle), permissions, a spend limit, a name already taken,
                    an approval already resolved, an agent already moving
6     timed out     what the command waited for did not come in time
                    (``send --wait --timeout``, ``down --timeout``)
====  ============  ===========================================================

The class comes from the typed error (``hyperhive.errors``), rebuilt from its
stable ``code`` when it crossed a socket: this table is the only place that
maps one to the other.
"""

from __future__ import annotations

from enum import IntEnum

import click
from pydantic import ValidationError

from hyperhive.errors import (
    Conflict,
    HiveError,
    InvalidRequest,
    MalformedFrame,
    NotFound,
    PermissionDenied,
    TimedOut,
    TopologyError,
    Unavailable,
    UnknownChild,
    UnknownCommand,
    UnknownParent,
)

__all__ = ["ExitCode", "exit_code"]


class ExitCode(IntEnum):
    OK = 0
    ERROR = 1
    USAGE = 2
    UNREACHABLE = 3
    NOT_FOUND = 4
    REFUSED = 5
    TIMED_OUT = 6


# Most specific first: an unknown parent is a TopologyError, but not found is what it is.
_BY_CLASS: tuple[tuple[type[HiveError], ExitCode], ...] = (
    (UnknownChild, ExitCode.NOT_FOUND),
    (UnknownParent, ExitCode.NOT_FOUND),
    (NotFound, ExitCode.NOT_FOUND),
    (Unavailable, ExitCode.UNREACHABLE),
    (PermissionDenied, ExitCode.REFUSED),
    (TopologyError, ExitCode.REFUSED),
    (Conflict, ExitCode.REFUSED),
    (TimedOut, ExitCode.TIMED_OUT),
    # Protocol failures (an older coordinator, a garbled answer) are not the user's input.
    (MalformedFrame, ExitCode.ERROR),
    (UnknownCommand, ExitCode.ERROR),
    (InvalidRequest, ExitCode.USAGE),
)


def exit_code(exc: BaseException) -> ExitCode:
    """The exit code for an error that ends a command."""
    if isinstance(exc, click.UsageError | ValidationError):
        return ExitCode.USAGE  # bad arguments, or a request their values make invalid
    if isinstance(exc, HiveError):
        for cls, code in _BY_CLASS:
            if isinstance(exc, cls):
                return code
    return ExitCode.ERROR
