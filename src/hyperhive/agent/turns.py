"""An agent's turns as its host holds them, while one runs and between them.

The harness reports here what only it knows: the claude process of the turn
that is running (its pid, for now; an interrupt of the running turn and a
message into it belong here too), and whether turns are held until the agent's
credentials change. Everyone else reads it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Turns"]


class Turns:
    """The running turn's claude, and whether turns are held for a login."""

    __slots__ = ("_claude_pid", "_needs_login")

    def __init__(self) -> None:
        self._claude_pid: int | None = None
        self._needs_login = False

    @property
    def claude_pid(self) -> int | None:
        """The running turn's claude (``None`` between turns)."""
        return self._claude_pid

    @property
    def needs_login(self) -> bool:
        """Held: no turns until its credentials change (``hivectl login``) or it restarts."""
        return self._needs_login

    @contextmanager
    def running(self, pid: int) -> Iterator[None]:
        """The block runs the turn whose claude is ``pid``."""
        self._claude_pid = pid
        try:
            yield
        finally:
            self._claude_pid = None

    @contextmanager
    def held_for_login(self) -> Iterator[None]:
        """Turns are held for the block (the harness waits there for new credentials)."""
        self._needs_login = True
        try:
            yield
        finally:
            self._needs_login = False
