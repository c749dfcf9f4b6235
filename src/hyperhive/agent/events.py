"""Each agent's events bus: turn state, a replayable history, live subscribers.

The bus is the authoritative turn state (``Idle → Thinking → Idle``,
``Compacting`` around compaction, each with its ``since``); the per-agent
API and the dashboard render it rather than deriving state from events.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["EventsBus", "TurnStateName"]

TurnStateName = Literal["idle", "thinking", "compacting", "stopped"]

HISTORY = 200


class EventsBus:
    """Per-agent broadcast with a bounded history (kept small: agents sleep cheap)."""

    def __init__(self, on_state: Callable[[TurnStateName, float], None] | None = None) -> None:
        self.history: deque[dict[str, Any]] = deque(maxlen=HISTORY)
        self._subs: set[MemoryObjectSendStream[dict[str, Any]]] = set()
        self._seq = 0
        self.turn_state: TurnStateName = "idle"
        self.turn_state_since = time.time()
        self.last_turn: dict[str, Any] | None = None
        self.context_usage: float | None = None
        self.session_id: str | None = None
        self.status_text = ""
        self._on_state = on_state

    def emit(self, kind: str, **data: Any) -> dict[str, Any]:
        self._seq += 1
        event = {"seq": self._seq, "kind": kind, "at": time.time(), **data}
        self.history.append(event)
        for send in list(self._subs):
            try:
                send.send_nowait(event)
            except anyio.WouldBlock:
                pass  # a stalled viewer must not stall the agent
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._subs.discard(send)
        return event

    def set_state(self, state: TurnStateName) -> None:
        if state == self.turn_state:
            return
        self.turn_state = state
        self.turn_state_since = time.time()
        self.emit("state", turn_state=state, since=self.turn_state_since)
        if self._on_state is not None:
            self._on_state(state, self.turn_state_since)

    def snapshot(self) -> dict[str, Any]:
        """The per-agent API's ``/state``."""
        return {
            "turn_state": self.turn_state,
            "turn_state_since": self.turn_state_since,
            "last_turn": self.last_turn,
            "context_usage": self.context_usage,
            "session_id": self.session_id,
            "status_text": self.status_text,
        }

    @asynccontextmanager
    async def subscribe(
        self, replay: bool = True
    ) -> AsyncIterator[MemoryObjectReceiveStream[dict[str, Any]]]:
        """Live events, preceded by the recent history when ``replay``."""
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](HISTORY + 64)
        if replay:
            for event in self.history:
                send.send_nowait(event)
        self._subs.add(send)
        try:
            yield receive
        finally:
            self._subs.discard(send)
            send.close()
            receive.close()
