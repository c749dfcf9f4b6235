"""Admission control: how many claude processes the host runs at once, and who goes next.

Every claude the host starts for an agent (a harness turn, the checkpoint and
``/compact`` turns, a subagent run) first takes one of the host's slots. A
herd of wakes then queues instead of spawning a claude each and running the
machine out of memory (24 agents with 8 subagents each could otherwise be 216
claudes at ~170 MB).

:class:`SlotQueue` is the pure rule (no I/O, no clock, no event loop):

- never more holders than slots, and never a free slot while someone waits;
- who goes next: the waiter whose agent holds the *fewest* slots right now,
  then the one that asked first (a ticket taken on enqueue). Among agents
  that hold nothing (the usual herd of turns) that is plain first-come
  first-served: woken first, run first. An agent cannot push ahead by asking
  again (a new request gets a new, later ticket) nor by queueing many
  subagents: each slot it holds ranks its next request behind agents holding
  fewer. No one starves: holds end (every claude run ends), and a waiter only
  ever yields to earlier tickets or to agents holding fewer slots than its own.

:class:`Admission` is the thin async wrapper the host shares between agents.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import anyio

__all__ = [
    "BYTES_PER_CLAUDE",
    "CLAUDES_PER_CORE",
    "UNLIMITED",
    "Abandoned",
    "Admission",
    "SlotKind",
    "SlotQueue",
    "Ticket",
    "Waiter",
    "choose",
    "default_slots",
    "machine_slots",
    "meminfo",
]

# A claude --print process measured ~170 MB resident (node + the CLI bundle);
# 275 MB leaves room for what it starts beside it (an MCP stdio server, a
# tool's shell) without counting on swap.
BYTES_PER_CLAUDE = 275 << 20
# A turn mostly waits on the model API; its CPU is spent starting node (~1 s)
# and running tools. A few per core keeps the cores busy without thrashing.
CLAUDES_PER_CORE = 4
UNLIMITED = sys.maxsize

SlotKind = Literal["turn", "subagent"]


def default_slots(mem_available: int, cores: int) -> int:
    """``min(available memory / 275 MB, 4 × cores)``, at least 1.

    Memory decides on a small-memory box, cores on a big one; at least one
    slot, or nothing would ever run.
    """
    return max(1, min(mem_available // BYTES_PER_CLAUDE, CLAUDES_PER_CORE * max(1, cores)))


def meminfo(path: Path = Path("/proc/meminfo")) -> tuple[int | None, int | None]:
    """This machine's ``(MemTotal, MemAvailable)`` in bytes (``None`` where unknown)."""
    found: dict[str, int] = {}
    try:
        for line in path.read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("MemTotal", "MemAvailable"):
                found[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return found.get("MemTotal"), found.get("MemAvailable")


def machine_slots(meminfo_path: Path = Path("/proc/meminfo")) -> int:
    """:func:`default_slots` for this machine, as the host starts (``MemAvailable``, CPUs)."""
    available = meminfo(meminfo_path)[1] or 0
    if available <= 0:  # no /proc: assume one claude's worth per core
        available = BYTES_PER_CLAUDE * (os.cpu_count() or 1)
    return default_slots(available, len(os.sched_getaffinity(0)))


@dataclass(frozen=True, slots=True)
class Waiter:
    ticket: int
    agent: str
    kind: SlotKind
    since: float  # wall clock of the request, for "waiting since"


def choose(waiting: Iterable[Waiter], held: Mapping[str, int]) -> Waiter | None:
    """The next waiter to admit: fewest slots held by its agent, then earliest ticket."""
    return min(waiting, key=lambda w: (held.get(w.agent, 0), w.ticket), default=None)


@dataclass
class SlotQueue:
    """Slots and their queue; every method is a pure state change."""

    capacity: int
    held: dict[str, int] = field(default_factory=dict)
    waiting: dict[int, Waiter] = field(default_factory=dict)
    _next: int = 0

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ValueError(f"claude slots must be at least 1, not {self.capacity}")

    @property
    def in_use(self) -> int:
        return sum(self.held.values())

    def enqueue(self, agent: str, kind: SlotKind, since: float) -> Waiter:
        self._next += 1
        waiter = Waiter(self._next, agent, kind, since)
        self.waiting[waiter.ticket] = waiter
        return waiter

    def cancel(self, ticket: int) -> bool:
        """Leave the queue; False if the ticket was no longer waiting (admitted or unknown)."""
        return self.waiting.pop(ticket, None) is not None

    def release(self, agent: str) -> None:
        count = self.held.get(agent, 0)
        if count <= 0:
            raise ValueError(f"{agent!r} holds no claude slot to release")
        if count == 1:
            del self.held[agent]
        else:
            self.held[agent] = count - 1

    def admit(self) -> list[Waiter]:
        """Fill free slots from the queue; returns who got one, in order."""
        admitted: list[Waiter] = []
        while self.in_use < self.capacity:
            nxt = choose(self.waiting.values(), self.held)
            if nxt is None:
                break
            del self.waiting[nxt.ticket]
            self.held[nxt.agent] = self.held.get(nxt.agent, 0) + 1
            admitted.append(nxt)
        return admitted


class Abandoned(Exception):
    """The request left the queue without a slot (its agent is stopping)."""


@dataclass(eq=False)
class Ticket:
    waiter: Waiter
    granted: anyio.Event = field(default_factory=anyio.Event)
    released: bool = False


class Admission:
    """The host's claude slots, shared by every agent it runs."""

    def __init__(self, capacity: int = UNLIMITED) -> None:
        self._queue = SlotQueue(capacity)
        self._tickets: dict[int, Ticket] = {}

    @property
    def capacity(self) -> int:
        return self._queue.capacity

    @property
    def in_use(self) -> int:
        return self._queue.in_use

    def waiting(self) -> list[Waiter]:
        """Who waits for a slot, in ticket order."""
        return sorted(self._queue.waiting.values(), key=lambda w: w.ticket)

    def enqueue(self, agent: str, kind: SlotKind) -> Ticket:
        """Ask for a slot; ``ticket.granted`` is set at once if one is free."""
        ticket = Ticket(self._queue.enqueue(agent, kind, time.time()))
        self._tickets[ticket.waiter.ticket] = ticket
        self._dispatch()
        return ticket

    async def wait(self, ticket: Ticket, abandon: anyio.Event | None = None) -> None:
        """Until ``ticket`` holds a slot. Cancelled, or ``abandon`` set first: out of the queue.

        ``abandon`` raises :class:`Abandoned`; cancellation propagates. Either
        way the ticket leaves the queue at once (and a slot granted in the same
        instant is given back).
        """
        if ticket.granted.is_set():
            return
        try:
            if abandon is None:
                await ticket.granted.wait()
            else:
                await _first_of(ticket.granted, abandon)
        except BaseException:
            self.release(ticket)
            raise
        if not ticket.granted.is_set():
            self.release(ticket)
            raise Abandoned(f"{ticket.waiter.agent} stopped while waiting for a claude slot")

    def release(self, ticket: Ticket) -> None:
        """Give the slot back, or leave the queue; idempotent."""
        if ticket.released:
            return
        ticket.released = True
        self._tickets.pop(ticket.waiter.ticket, None)
        if not self._queue.cancel(ticket.waiter.ticket):
            self._queue.release(ticket.waiter.agent)
        self._dispatch()

    @asynccontextmanager
    async def slot(
        self,
        agent: str,
        kind: SlotKind,
        *,
        on_wait: Callable[[Waiter], None] | None = None,
        abandon: anyio.Event | None = None,
    ) -> AsyncIterator[None]:
        """Hold a slot for the block; ``on_wait`` is called if the request has to queue."""
        ticket = self.enqueue(agent, kind)
        try:
            if not ticket.granted.is_set():
                if on_wait is not None:
                    on_wait(ticket.waiter)
                await self.wait(ticket, abandon)
            yield
        finally:
            self.release(ticket)

    def _dispatch(self) -> None:
        for waiter in self._queue.admit():
            self._tickets[waiter.ticket].granted.set()


async def _first_of(a: anyio.Event, b: anyio.Event) -> None:
    async with anyio.create_task_group() as tg:

        async def wait(event: anyio.Event) -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(wait, a)
        tg.start_soon(wait, b)
