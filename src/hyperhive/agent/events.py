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

    def on_state(self, report: Callable[[TurnStateName, float], None]) -> None:
        """Tell ``report`` of every change of turn state from now on."""
        self._on_state = report

    def set_status_text(self, text: str) -> None:
        """The agent set its status line (its own page shows it at once)."""
        self.status_text = text

    def set_session(self, session_id: str | None) -> None:
        """The claude session its next turn resumes."""
        self.session_id = session_id

    def set_context_usage(self, usage: float | None) -> None:
        """How full its context window was after its last run."""
        self.context_usage = usage

    def set_trace_context(self, context: Context | None) -> None:
        """The open turn's span (``None``: no turn open), the parent of tool-call spans."""
        self.trace_context = context

    def turn_ended(self, last_turn: dict[str, Any]) -> None:
        """A claude run ended: its summary is the last turn's, and an event."""
        self.last_turn = last_turn
        self.emit("turn_end", **last_turn)

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
