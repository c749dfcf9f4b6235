"""Typed rows the store hands out: one frozen dataclass per stored thing.

Pure data, no I/O and no backend types: a row read from SQLite and the same
row read from PostgreSQL compare equal. Times are Unix seconds (``float``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from hyperhive.runcost import Figures, summed

__all__ = [
    "ActivityRow",
    "AgentState",
    "Assignment",
    "ApprovalRow",
    "ApprovalState",
    "CompactRequest",
    "DeployEntry",
    "DueWork",
    "FireReminder",
    "FireSchedule",
    "Fired",
    "HostRow",
    "LooseEndKind",
    "LooseEndRow",
    "MessageCounts",
    "MessageRow",
    "OpenLooseEnds",
    "PendingTrash",
    "Poll",
    "QuestionRow",
    "QuestionState",
    "Recv",
    "ReminderRow",
    "ScheduleRow",
    "SpendEntry",
    "SpendPoint",
    "SpendRun",
    "SpendTotal",
    "TodoRow",
    "TurnRecord",
]

LooseEndKind = Literal["reminder", "todo", "approval", "question", "schedule"]
ApprovalState = Literal["pending", "approved", "denied", "cancelled"]
QuestionState = Literal["open", "answered", "cancelled"]


@dataclass(frozen=True, slots=True)
class ActivityRow:
    """One thing the hive did (a turn, a spawn, a crash…), for the dashboard's feed.

    ``agent`` is the actor; ``others`` are the other agents it concerns (the
    feed's agent filter matches either). ``detail`` is small JSON: cost and
    tokens, an exit code, a reason.
    """

    id: int
    at: float
    kind: str
    agent: str
    others: tuple[str, ...]
    title: str
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MessageRow:
    id: int
    sender: str
    recipient: str
    body: str
    in_reply_to: int | None
    created_at: float
    delivered_at: float | None = None
    acked_at: float | None = None

    @property
    def acked(self) -> bool:
        return self.acked_at is not None


@dataclass(frozen=True, slots=True)
class MessageCounts:
    """One name's traffic: rows it sent, rows handed to it, rows it has yet to ack."""

    agent: str
    sent: int
    delivered: int
    queued: int


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


@dataclass(frozen=True, slots=True)
class Recv:
    """What ``recv`` hands an agent: its oldest undelivered mail, or "you are fenced"."""

    fenced: bool
    messages: tuple[MessageRow, ...] = ()


@dataclass(frozen=True, slots=True)
class Poll:
    """One non-blocking look for a waiting harness (``None`` from the store = nothing)."""

    stop: bool
    todo_version: int
    messages: tuple[MessageRow, ...] = ()
    todos_changed: bool = False
    compact: bool = False

    @staticmethod
    def found(
        version: int, messages: tuple[MessageRow, ...], todos_changed: bool, compact: bool
    ) -> Poll | None:
        """What an unfenced poll found; ``None`` when there is nothing to wake for."""
        if not messages and not todos_changed and not compact:
            return None
        return Poll(False, version, messages, todos_changed, compact)


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


@dataclass(frozen=True, slots=True)
class ReminderRow:
    id: int
    agent: str
    message: str
    due_at: float
    created_at: float
    fired_at: float | None = None


@dataclass(frozen=True, slots=True)
class TodoRow:
    id: int
    agent: str
    subsystem: str
    key: str
    body: str
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class ApprovalRow:
    id: int
    kind: str
    requester: str
    subject: str
    payload: Mapping[str, Any]
    state: ApprovalState
    created_at: float
    resolved_at: float | None = None
    resolution: str | None = None


@dataclass(frozen=True, slots=True)
class QuestionRow:
    id: int
    asker: str
    question: str
    message_id: int | None
    state: QuestionState
    created_at: float
    answer: str | None = None
    answered_at: float | None = None


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    id: int
    owner: str
    target: str
    prompt: str
    every_seconds: float | None
    cron: str | None
    next_at: float
    created_at: float
    cancelled_at: float | None = None


LooseEndRow = ReminderRow | TodoRow | ApprovalRow | QuestionRow | ScheduleRow


@dataclass(frozen=True, slots=True)
class OpenLooseEnds:
    """Every open row of each kind, in display order (reminders by due time)."""

    reminders: tuple[ReminderRow, ...] = ()
    todos: tuple[TodoRow, ...] = ()
    approvals: tuple[ApprovalRow, ...] = ()
    questions: tuple[QuestionRow, ...] = ()
    schedules: tuple[ScheduleRow, ...] = ()


@dataclass(frozen=True, slots=True)
class DueWork:
    """Reminders and schedules due at a moment, read before anything is fired.

    ``next_due`` is the earliest due time of any unfired reminder or live
    schedule (these included), ``None`` if there is none.
    """

    reminders: tuple[ReminderRow, ...] = ()
    schedules: tuple[ScheduleRow, ...] = ()
    next_due: float | None = None


@dataclass(frozen=True, slots=True)
class FireReminder:
    """Deliver reminder ``id`` as ``body`` (rendered by the caller)."""

    id: int
    body: str


@dataclass(frozen=True, slots=True)
class FireSchedule:
    """Deliver schedule ``id`` as ``body`` and move it to ``next_at``.

    ``was_next_at`` is the due time the caller read: a schedule fired or
    moved since then is left alone, so two firers never deliver it twice.
    """

    id: int
    body: str
    was_next_at: float
    next_at: float


@dataclass(frozen=True, slots=True)
class Fired:
    """What ``fire`` delivered (message ids per recipient) and the next due time."""

    delivered: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    next_due: float | None = None


@dataclass(frozen=True, slots=True)
class DeployEntry:
    """One entry of the meta log: an applied config, a removal, or a note.

    ``config`` is the full TOML text applied (``None`` for a removal or a
    note); ``topology`` is the whole tree after the entry, when it changed it.
    """

    seq: int
    at: float
    action: str
    agent: str | None
    message: str
    config: str | None = None
    topology: Mapping[str, str | None] | None = None


@dataclass(frozen=True, slots=True)
class PendingTrash:
    """A destroyed agent whose directories are still on ``host``'s disk, to be moved to
    that host's trash when it is connected again (#14: the coordinator has no disk of it)."""

    agent: str
    host: str
    destroyed_at: float


@dataclass(frozen=True, slots=True)
class Assignment:
    """Which agent host ``agent`` belongs on, pinned there by the operator or not, and
    an ``agents move`` in progress (``move_phase``: draining, copying, cleanup)."""

    agent: str
    host: str
    pinned: bool
    assigned_at: float
    move_id: str | None = None
    move_from: str | None = None
    move_to: str | None = None
    move_phase: str | None = None


@dataclass(frozen=True, slots=True)
class HostRow:
    """A remote agent host's credential record: only a hash of its secret is kept."""

    name: str
    secret_hash: str
    created_at: float
    rotated_at: float | None = None
    revoked_at: float | None = None
    last_seen_at: float | None = None
    # The lease (``hyperhive.netlink.lease``): the latest link epoch and its expiry, the
    # last heartbeat, and the capacity it reported (JSON of ``HostCapacity``).
    epoch: int = 0
    lease_expires_at: float | None = None
    heartbeat_at: float | None = None
    capacity: str | None = None
    # When its credential stops being accepted (None: never).
    expires_at: float | None = None
    # The link epoch whose lease expiry was handled (agents ``lost``, operator told).
    lost_epoch: int | None = None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def expired(self, now: float) -> bool:
        """Whether its credential is past its expiry."""
        return self.expires_at is not None and self.expires_at <= now


@dataclass(frozen=True, slots=True)
class SpendEntry:
    """What one claude run cost, counted to ``agent`` (a subagent's run to its parent).

    ``key`` names the run and is unique per agent: recording it twice (a
    resent ``turn_end``) counts it once. The figures are the run's own
    (:mod:`hyperhive.runcost`); ``session_usd`` is what claude said the
    session had cost after the run (``None``: it said nothing, or the row is
    older than the session being kept).
    """

    agent: str
    key: str
    kind: str  # "turn", "compaction" or "subagent"
    at: float
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    session_id: str | None = None
    session_usd: float | None = None

    def figures(self) -> Figures:
        """The run's own USD and tokens."""
        return Figures(
            self.cost_usd,
            self.input_tokens,
            self.output_tokens,
            self.cache_read_tokens,
            self.cache_creation_tokens,
        )

    @property
    def tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_creation_tokens
        )


@dataclass(frozen=True, slots=True)
class SpendRun:
    """One claude run as reported: its session's totals per model after it (none: no result).

    What :meth:`~hyperhive.store.base.SpendRepo.record` turns into a
    :class:`SpendEntry` of the run's own figures.
    """

    agent: str
    key: str
    kind: str
    at: float
    session_id: str | None = None
    session_totals: Mapping[str, Figures] = field(default_factory=dict)

    def entry(self, own: Figures) -> SpendEntry:
        return SpendEntry(
            self.agent,
            self.key,
            self.kind,
            self.at,
            own.usd,
            own.input_tokens,
            own.output_tokens,
            own.cache_read_tokens,
            own.cache_creation_tokens,
            self.session_id,
            summed(self.session_totals.values()).usd if self.session_totals else None,
        )


@dataclass(frozen=True, slots=True)
class SpendTotal:
    """One agent's spend over a period: USD, tokens (all four kinds) and runs."""

    agent: str
    usd: float = 0.0
    tokens: int = 0
    runs: int = 0


@dataclass(frozen=True, slots=True)
class SpendPoint:
    """One agent's spend in the bucket starting at ``start``."""

    agent: str
    start: float
    usd: float
    tokens: int
