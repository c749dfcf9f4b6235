"""Polls parked on the database thread, answered by the commit that wakes their agent.

A long-poll whose poll found nothing leaves that poll here. The next batch
that wakes its agent (a send to it, a fence, a todo…) re-runs the poll in
its own transaction, before its commit, and the same hand-back to the event
loop answers the waiter: a send → wake costs one batch and one fsync, not a
second batch and a second pair of thread hops.

The waiter still sleeps on the store's wake-up (the ``Notifier``); a parked
poll only spares it the second round trip. So a wake the parked poll did
not answer (it found nothing, it failed, the waiter woke for another
reason) is handled as before: the waiter withdraws it and polls again.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

__all__ = ["Parked", "Parking"]

_T = TypeVar("_T")

# A parked poll's life: registered, taken by a running batch, then answered,
# or back to parked (it found nothing), or withdrawn by its waiter.
PARKED, TAKEN, ANSWERED, WITHDRAWN = "parked", "taken", "answered", "withdrawn"


class Parked(Generic[_T]):
    """One parked poll; its waiter calls :meth:`withdraw`, then :meth:`answer` if told to."""

    __slots__ = ("_parking", "agent", "future", "loop", "op", "state", "withdrawing")

    def __init__(self, parking: Parking, agent: str, op: Callable[[Any], _T | None]) -> None:
        self._parking = parking
        self.agent = agent
        self.op = op
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future[_T | None] = self.loop.create_future()
        self.state = PARKED
        self.withdrawing = False

    def withdraw(self) -> bool:
        """Stop waiting here. True: no answer will come. False: a batch holds it (or
        answered it), and :meth:`answer` gives what it found (``None`` for nothing)."""
        return self._parking.withdraw(self)

    async def answer(self) -> _T | None:
        return await self.future


class Parking:
    """The parked polls by agent; the database thread takes them, their waiters withdraw."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_agent: dict[str, list[Parked[Any]]] = {}

    def __bool__(self) -> bool:
        # Unlocked: only the database thread adds, so it never misses one of its own.
        return bool(self._by_agent)

    def take(self, agents: Iterable[str]) -> list[Parked[Any]]:
        """The polls parked for ``agents``, now held by the running batch."""
        taken: list[Parked[Any]] = []
        with self._lock:
            for agent in agents:
                parked = self._by_agent.pop(agent, None)
                if parked:
                    for p in parked:
                        p.state = TAKEN
                    taken.extend(parked)
        return taken

    def settle(
        self, parked: Iterable[Parked[Any]], answered: Iterable[Parked[Any]]
    ) -> list[Parked[Any]]:
        """After the batch: ``answered`` are done; the rest of ``parked`` wait on.

        Returns those whose waiter withdrew while the batch held them: they
        are answered ``None`` (nothing), as their waiter expects.
        """
        nothing: list[Parked[Any]] = []
        with self._lock:
            for p in answered:
                p.state = ANSWERED
            for p in parked:
                if p.state == ANSWERED:
                    continue
                if p.withdrawing:
                    p.state = WITHDRAWN
                    nothing.append(p)
                else:
                    p.state = PARKED
                    self._by_agent.setdefault(p.agent, []).append(p)
        return nothing

    def withdraw(self, p: Parked[Any]) -> bool:
        with self._lock:
            waiting = self._by_agent.get(p.agent)
            if p.state == PARKED and (waiting is None or p not in waiting):
                # Not registered yet: its batch is still to settle (its waiter was
                # cancelled before the answer came). settle() must not park it.
                p.withdrawing = True
                return False
            if p.state == PARKED:
                assert waiting is not None
                p.state = WITHDRAWN
                waiting.remove(p)
                if not waiting:
                    del self._by_agent[p.agent]
                return True
            if p.state == TAKEN:
                p.withdrawing = True
                return False
            return p.state == WITHDRAWN
