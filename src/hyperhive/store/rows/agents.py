"""An agent's ``agent_state`` row and what its turns and compactions report."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AgentState", "CompactRequest", "TurnRecord"]


@dataclass(frozen=True, slots=True)
class AgentState:
    """One agent's ``agent_state`` row (a fresh agent reads as these defaults)."""

    name: str
    status_text: str = ""
    status_set_at: float | None = None
    incarnation: int = 0
    fenced: bool = False
    compact_pending: bool = False
    last_context_usage: float | None = None
    last_outcome: str | None = None
    last_turn_at: float | None = None
    session_id: str | None = None
    todo_version: int = 0
    desired_running: bool = True
    needs_login: bool = False
    # The hyperhive and claude versions its host ran at its last start (``None``: not
    # recorded yet), and, once its host runs others, what changed (it needs a restart).
    started_hive: str | None = None
    started_claude: str | None = None
    needs_update: str | None = None


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """The agent's state just *before* ``record_turn`` changed it."""

    was_needs_login: bool
    compact_pending: bool


@dataclass(frozen=True, slots=True)
class CompactRequest:
    """``queued`` is False when usage is unknown or not above the threshold (if any)."""

    queued: bool
    usage: float | None
