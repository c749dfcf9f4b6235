"""Each agent's events bus: turn state, a replayable history, live subscribers.

The bus is the authoritative turn state (``Idle → Thinking → Idle``,
``Compacting`` around compaction, ``WaitingSlot`` before either while the
host's claude slots are all taken, each with its ``since``); the per-agent
API and the dashboard render it rather than deriving state from events.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal

from opentelemetry.context import Context

from hyperhive.bus import EventBus

__all__ = ["EventsBus", "TurnStateName"]

TurnStateName = Literal["idle", "waiting_slot", "thinking", "compacting", "stopped"]

HISTORY = 200


class EventsBus(EventBus):
    """Per-agent broadcast with a bounded history (kept small: agents sleep cheap)."""

    def __init__(self, on_state: Callable[[TurnStateName, float], None] | None = None) -> None:
        super().__init__(buffer=64, history=HISTORY, replay=True)
        self.turn_state: TurnStateName = "idle"
        self.turn_state_since = time.time()
        self.last_turn: dict[str, Any] | None = None
        self.context_usage: float | None = None
        self.session_id: str | None = None
        self.status_text = ""
        # The open turn's span (hyperhive.agent.turntrace): the parent of tool-call spans.
        self.trace_context: Context | None = None
        # Why this agent's claude cannot be started (the remedy included), while that lasts.
        self.launch_problem: str | None = None
        self._on_state = on_state

    def set_launch_problem(self, problem: str | None) -> None:
        """Say (or clear) why claude cannot start: on the stream, and to the coordinator."""
        if problem == self.launch_problem:
            return
        self.launch_problem = problem
        self.emit("launch_problem", problem=problem)
        if self._on_state is not None:
            self._on_state(self.turn_state, self.turn_state_since)

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
            "launch_problem": self.launch_problem,
        }
