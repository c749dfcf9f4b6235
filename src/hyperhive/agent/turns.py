"""An agent's turns as its host holds them, while one runs and between them.

The harness reports here what only it knows: the claude process of the turn
that is running (its pid, and its input: :class:`~.steering.TurnInput`, through
which an interrupt and more messages reach the running session), and whether
turns are held until the agent's credentials change. Everyone else reads it,
or steers the running turn through :meth:`Turns.interrupt` and :meth:`Turns.offer`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from hyperhive.agent.steering import TurnInput

__all__ = ["Turns"]


class Turns:
    """The running turn's claude, and whether turns are held for a login."""

    __slots__ = ("_claude_pid", "_input", "_needs_login")

    def __init__(self) -> None:
        self._claude_pid: int | None = None
        self._input: TurnInput | None = None
        self._needs_login = False

    @property
    def claude_pid(self) -> int | None:
        """The running turn's claude (``None`` between turns)."""
        return self._claude_pid

    @property
    def needs_login(self) -> bool:
        """Held: no turns until its credentials change (``hivectl login``) or it restarts."""
        return self._needs_login

    @property
    def steerable(self) -> bool:
        """A turn runs that takes an interrupt and more messages now."""
        return self._input is not None and self._input.steerable and self._input.open

    async def interrupt(self, tell: str | None = None) -> bool:
        """End the running turn (``tell``: then give the model this text, same session).

        ``False``: no turn that can be interrupted is running (between turns,
        compacting, or already ending).
        """
        return self._input is not None and await self._input.interrupt(tell)

    async def offer(self, text: str, ids: Sequence[int] = ()) -> bool:
        """Give the running turn's model ``text`` (carrying messages ``ids``); ``False``: no
        turn takes it now (the caller keeps the messages for the next)."""
        return self._input is not None and await self._input.send(text, ids)

    @contextmanager
    def running(self, pid: int, turn_input: TurnInput | None = None) -> Iterator[None]:
        """The block runs the turn whose claude is ``pid``, steered through ``turn_input``."""
        self._claude_pid = pid
        self._input = turn_input
        try:
            yield
        finally:
            self._claude_pid = None
            self._input = None

    @contextmanager
    def held_for_login(self) -> Iterator[None]:
        """Turns are held for the block (the harness waits there for new credentials)."""
        self._needs_login = True
        try:
            yield
        finally:
            self._needs_login = False
