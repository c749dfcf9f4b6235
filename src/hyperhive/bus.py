"""A broadcast of ``{"seq", "kind", "at", ...}`` events with an optional replayable history.

Used by the coordinator (topology, agents, approvals for the dashboard) and by
each agent on the host (its turn stream). Pushed, never polled; a slow
subscriber drops events rather than stalling the emitter.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["EventBus"]


class EventBus:
    def __init__(self, buffer: int = 256, history: int = 0, replay: bool = False) -> None:
        self._replay = replay  # whether subscribers get the history first by default
        self.history: deque[dict[str, Any]] = deque(maxlen=history)
        self._subs: set[MemoryObjectSendStream[dict[str, Any]]] = set()
        self._buffer = buffer
        self._seq = 0

    def emit(self, kind: str, **data: Any) -> dict[str, Any]:
        self._seq += 1
        event = {"seq": self._seq, "kind": kind, "at": time.time(), **data}
        if self.history.maxlen:
            self.history.append(event)
        for send in list(self._subs):
            try:
                send.send_nowait(event)
            except anyio.WouldBlock:
                pass  # a stalled viewer must not stall the emitter
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._subs.discard(send)
        return event

    @asynccontextmanager
    async def subscribe(
        self, replay: bool | None = None
    ) -> AsyncIterator[MemoryObjectReceiveStream[dict[str, Any]]]:
        """Live events, preceded by the kept history when ``replay`` (or the default)."""
        size = self._buffer + len(self.history)
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](size)
        if self._replay if replay is None else replay:
            for event in self.history:
                send.send_nowait(event)
        self._subs.add(send)
        try:
            yield receive
        finally:
            self._subs.discard(send)
            send.close()
            receive.close()
