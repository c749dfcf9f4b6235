"""In-process wake-ups and the coordinator's event bus.

``Notifier`` pushes "something changed for agent X" to whoever is long-
polling X's ``wait``; ``EventBus`` fans coordinator events (a reparent, an
agent coming up) out to subscribers such as the dashboard. Both are pushed,
never polled.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["EventBus", "Notifier"]


class Notifier:
    """One generation event per agent, replaced each time it fires."""

    def __init__(self) -> None:
        self._events: dict[str, anyio.Event] = {}

    def event(self, agent: str) -> anyio.Event:
        """The event the next change for ``agent`` will set."""
        ev = self._events.get(agent)
        if ev is None:
            ev = self._events[agent] = anyio.Event()
        return ev

    def notify(self, agent: str) -> None:
        ev = self._events.pop(agent, None)
        if ev is not None:
            ev.set()

    async def wait(self, event: anyio.Event, seconds: float) -> bool:
        """Wait for ``event`` up to ``seconds``; True if it fired."""
        with anyio.move_on_after(max(0.0, seconds)):
            await event.wait()
            return True
        return False


class EventBus:
    """Broadcast of ``{"kind": ..., ...}`` dicts; slow subscribers drop events."""

    def __init__(self, buffer: int = 256) -> None:
        self._subs: set[MemoryObjectSendStream[dict[str, Any]]] = set()
        self._buffer = buffer

    def emit(self, kind: str, **data: Any) -> None:
        event = {"kind": kind, "at": time.time(), **data}
        for send in list(self._subs):
            try:
                send.send_nowait(event)
            except anyio.WouldBlock:
                pass  # a stalled viewer must not stall the coordinator
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._subs.discard(send)

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[MemoryObjectReceiveStream[dict[str, Any]]]:
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](self._buffer)
        self._subs.add(send)
        try:
            yield receive
        finally:
            self._subs.discard(send)
            send.close()
            receive.close()
