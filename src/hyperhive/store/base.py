"""The store interface: one ``Store``, a repository per aggregate, two backends.

Every method is one transaction: when its await returns, the change has
been committed durably (an ``ok`` the coordinator answers has survived
fsync), or it raised and nothing changed. Operations that span tables
(asking the operator = message + question; firing due work = messages +
updates) are single methods for that reason.

Wake-ups belong to the store. After a commit that adds something an agent's
``wait`` must see (mail, a todo change, a compact flag, a fence, a new
incarnation), the store reports the agent's name to every ``on_change``
callback, on the event loop, after the commit. SQLite does it in-process;
PostgreSQL with ``NOTIFY`` in the same transaction and ``LISTEN`` (plus a
sweep after reconnecting, because NOTIFY is not stored).

Backends raise ``hyperhive.errors`` only: ``NotFound``, ``Conflict``,
``InvalidRequest``, ``LimitExceeded`` for the domain rules below and
``StorageError`` when the database itself refuses.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from hyperhive.errors import Conflict, NotFound
from hyperhive.runcost import Figures
from hyperhive.store.rows import (
    ActivityRow,
    AgentState,
    ApprovalRow,
    ApprovalState,
    Assignment,
    CompactRequest,
    DeployEntry,
    DueWork,
    Fired,
    FireReminder,
    FireSchedule,
    HostRow,
    LooseEndKind,
    LooseEndRow,
    MessageCounts,
    MessageRow,
    OpenLooseEnds,
    PendingTrash,
    Poll,
    QuestionRow,
    Recv,
    ReminderRow,
    ScheduleRow,
    SpendEntry,
    SpendPoint,
    SpendRun,
    SpendTotal,
    TodoRow,
    TurnRecord,
)

__all__ = [
    "ActivityRepo",
    "AgentRepo",
    "ApprovalRepo",
    "ChangeCallback",
    "ChangeFeed",
    "FeedCursor",
    "HostRepo",
    "PlacementRepo",
    "LooseEndRepo",
    "MessageRepo",
    "MetaLogRepo",
    "NOT_PARKED",
    "ParkedPoll",
    "ScheduleRepo",
    "SettingsRepo",
    "SpendRepo",
    "Store",
    "TopologyRepo",
    "TrashRepo",
    "host_missing",
    "host_taken",
    "move_missing",
]

log = logging.getLogger(__name__)

ChangeCallback = Callable[[str], None]

#: A feed position: an item's ``(at, id)``. A page holds the rows strictly before it.
FeedCursor = tuple[float, int]


class ChangeFeed:
    """The ``on_change`` subscribers; backends call :meth:`publish` after commit."""

    def __init__(self) -> None:
        self._callbacks: list[ChangeCallback] = []

    def subscribe(self, callback: ChangeCallback) -> Callable[[], None]:
        self._callbacks.append(callback)

        def unsubscribe() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return unsubscribe

    def publish(self, agents: Iterable[str]) -> None:
        for agent in agents:
            for callback in list(self._callbacks):
                try:
                    callback(agent)
                except Exception:  # one bad subscriber must not starve the others
                    log.exception("store change subscriber failed for %s", agent)


class ParkedPoll(Protocol):
    """A poll that found nothing, left in the store for its agent's next wake-up."""

    def withdraw(self) -> bool:
        """Stop it. True: no answer is coming. False: one is, from :meth:`answer`."""
        ...

    async def answer(self) -> Poll | None:
        """What the commit that held it found (``None``: nothing, poll again)."""
        ...


class _NotParked:
    """A parked poll nothing will answer."""

    def withdraw(self) -> bool:
        return True

    async def answer(self) -> Poll | None:
        return None


NOT_PARKED: ParkedPoll = _NotParked()


class MessageRepo(ABC):
    """The durable mailbox. Delivery is at-least-once.

    A row handed out by ``recv``/``poll`` is *delivered*; ``ack_until`` or
    ``ack_ids`` make it *acked*, and an acked row is never handed out again.
    ``attach`` (a new harness incarnation) makes every delivered, unacked
    row of that agent undelivered again. Marking rows delivered need not
    force its own fsync: losing that mark only means a redelivery.
    """

    @abstractmethod
    async def send(
        self, sender: str, recipient: str, body: str, in_reply_to: int | None = None
    ) -> int:
        """Store one message; wakes ``recipient``. ``NotFound`` for a bad ``in_reply_to``.

        ``in_reply_to`` of ``None`` or ≤ 0 means "not a reply".
        """

    @abstractmethod
    async def send_keyed(
        self, sender: str, recipient: str, body: str, key: str
    ) -> tuple[int, bool]:
        """Store one message unless ``sender`` already delivered ``key`` to ``recipient``.

        Returns the message's id and whether it is new; a repeat returns the
        first delivery's id and wakes nobody. The key and the message commit
        together, so a producer that crashed before noting a delivery can
        simply send again.
        """

    @abstractmethod
    async def get(self, message_id: int) -> MessageRow | None: ...

    @abstractmethod
    async def recv(self, agent: str, limit: int) -> Recv:
        """The oldest ≤ ``limit`` undelivered rows, marked delivered; or fenced."""

    @abstractmethod
    async def poll(self, agent: str, todo_version: int, limit: int) -> Poll | None:
        """What a waiting harness should wake for, or ``None`` if nothing yet.

        A stop (fenced) wins; otherwise undelivered mail (marked delivered),
        an open todo upserted after the caller's ``todo_version`` (a net change:
        a todo filed and cleared since then wakes no one), or a pending compact.
        """

    async def poll_or_park(self, agent: str, todo_version: int, limit: int) -> Poll | ParkedPoll:
        """:meth:`poll` for a long-poll: when nothing is there yet, a parked poll.

        A backend may answer the parked poll from the commit that next wakes
        ``agent`` (no second round trip); this one never does. Either way the
        waiter sleeps on the store's wake-up, then withdraws the parked poll.
        """
        got = await self.poll(agent, todo_version, limit)
        return NOT_PARKED if got is None else got

    @abstractmethod
    async def ack_until(self, agent: str, up_to: int) -> int:
        """Ack every row of ``agent``'s with id ≤ ``up_to``; return how many."""

    @abstractmethod
    async def ack_ids(self, agent: str, ids: Sequence[int]) -> int:
        """Ack exactly these rows of ``agent``'s; others' ids are ignored."""

    @abstractmethod
    async def attach(self, agent: str) -> int:
        """New incarnation: unfence, redeliver unacked rows; return its number. Wakes."""

    @abstractmethod
    async def fence(self, agent: str) -> None:
        """The next ``recv``/``poll`` of ``agent`` says stop. Wakes."""

    @abstractmethod
    async def inbox(
        self, recipient: str, limit: int = 50, unread_only: bool = False
    ) -> list[MessageRow]:
        """The newest ``limit`` rows to ``recipient``, oldest first."""

    @abstractmethod
    async def outbox(self, sender: str, limit: int = 50) -> list[MessageRow]:
        """The newest ``limit`` rows from ``sender``, oldest first."""

    @abstractmethod
    async def thread(self, message_id: int) -> list[MessageRow]:
        """The whole reply tree ``message_id`` belongs to, by id ([] if unknown)."""

    @abstractmethod
    async def unread_counts(self, recipient: str) -> dict[str, int]:
        """Unacked rows to ``recipient``, counted per sender."""

    @abstractmethod
    async def scan(self, after_id: int = 0, limit: int = 1000) -> list[MessageRow]:
        """Every row with id > ``after_id``, by id: the read API for audits and tests."""

    @abstractmethod
    async def page(
        self, before: FeedCursor | None = None, limit: int = 50, agent: str | None = None
    ) -> list[MessageRow]:
        """Newest first by ``(created_at, id)``: up to ``limit`` rows strictly before
        ``before`` (None: from the newest), only those ``agent`` sent or received when
        given (the activity feed). Walks an index and stops at ``limit``."""

    @abstractmethod
    async def counts(self) -> list[MessageCounts]:
        """Per sender or recipient name, by name: sent, delivered, still unacked (metrics)."""


class AgentRepo(ABC):
    """``agent_state``: one row per agent, created on first touch with defaults."""

    @abstractmethod
    async def ensure(self, names: Sequence[str]) -> None: ...

    @abstractmethod
    async def get(self, name: str) -> AgentState:
        """The row (created with defaults if absent)."""

    @abstractmethod
    async def all(self) -> list[AgentState]:
        """Every row, by name."""

    @abstractmethod
    async def set_status(self, name: str, text: str, at: float | None) -> None:
        """Set the status line; ``at`` is ``None`` when cleared."""

    @abstractmethod
    async def record_turn(
        self,
        name: str,
        outcome: str,
        context_usage: float | None,
        session_id: str | None,
        *,
        ack: Sequence[int] = (),
    ) -> TurnRecord:
        """A turn ended: ack its handled messages, store its outcome, clear compact.

        ``needs_login`` becomes ``outcome == "needs_login"``; ``None`` usage or
        session keep the previous value. Returns the state before the change.
        """

    @abstractmethod
    async def request_compact(self, name: str, above: float | None) -> CompactRequest:
        """Flag a compact if the last usage is known and > ``above`` (``None``: always,
        the operator's ungated compact); wakes if queued."""

    @abstractmethod
    async def set_desired(self, name: str, running: bool) -> None: ...

    @abstractmethod
    async def desired_running(self) -> frozenset[str]: ...

    @abstractmethod
    async def delete(self, name: str) -> bool:
        """Forget the agent's state row (its mail and loose ends stay)."""


class LooseEndRepo(ABC):
    """Reminders, todos and operator questions, plus the cross-kind view and cancel.

    Who may see or cancel what is the caller's rule (from the topology);
    the store only stores. A todo change bumps the agent's ``todo_version``.
    """

    @abstractmethod
    async def remind(self, agent: str, message: str, due_at: float, max_pending: int) -> int:
        """Add a reminder; ``LimitExceeded`` if ``agent`` already has ``max_pending``."""

    @abstractmethod
    async def todo_upsert(
        self, agent: str, subsystem: str, key: str, body: str, *, wake: bool = True
    ) -> int:
        """Insert or replace the todo at (agent, subsystem, key); bumps and wakes.

        ``wake=False`` stores it at version 0: listed, but no waiter wakes for it.
        """

    @abstractmethod
    async def todo_clear(self, agent: str, subsystem: str, key: str) -> bool: ...

    @abstractmethod
    async def ask(self, asker: str, question: str, recipient: str, body: str) -> tuple[int, int]:
        """A question row plus its message ``body`` to ``recipient``: (question, message)."""

    @abstractmethod
    async def answer(self, question_id: int, answer: str, sender: str) -> tuple[QuestionRow, int]:
        """Close an open question; the answer goes to the asker in reply to its message.

        Returns the answered row and the reply's message id. ``NotFound`` for
        an unknown id, ``InvalidRequest`` if it is no longer open.
        """

    @abstractmethod
    async def questions(self, open_only: bool = True) -> list[QuestionRow]: ...

    @abstractmethod
    async def reminders(self, include_fired: bool = False) -> list[ReminderRow]:
        """Every reminder (unfired only, unless ``include_fired``), by id."""

    @abstractmethod
    async def todos(self, agent: str | None = None) -> list[TodoRow]:
        """Every todo (of ``agent`` if given), by id."""

    @abstractmethod
    async def get(self, kind: LooseEndKind, row_id: int) -> LooseEndRow | None: ...

    @abstractmethod
    async def cancel(self, kind: LooseEndKind, row_id: int) -> bool:
        """Cancel an open row; ``False`` if absent or already closed.

        Reminders (unfired) and todos are deleted; approvals, questions and
        schedules are marked cancelled and stay readable.
        """

    @abstractmethod
    async def open(self, agents: Sequence[str] | None = None) -> OpenLooseEnds:
        """Every open row whose agent is in ``agents`` (``None``: the whole hive).

        The agent of a row is its reminder/todo agent, approval requester,
        question asker, or schedule target.
        """


class ApprovalRepo(ABC):
    @abstractmethod
    async def create(
        self, kind: str, requester: str, subject: str, payload: Mapping[str, Any]
    ) -> int: ...

    @abstractmethod
    async def get(self, approval_id: int) -> ApprovalRow | None: ...

    @abstractmethod
    async def list(self, pending_only: bool = True) -> list[ApprovalRow]: ...

    @abstractmethod
    async def pending_for(self, kind: str, subject: str) -> int | None:
        """The id of a pending approval of ``kind`` for ``subject``, if one exists."""

    @abstractmethod
    async def resolve(self, approval_id: int, state: ApprovalState, resolution: str) -> ApprovalRow:
        """Close a pending approval. ``NotFound``; ``Conflict`` if already closed."""


class ScheduleRepo(ABC):
    """Recurring prompts, and firing everything due (reminders included)."""

    @abstractmethod
    async def add(
        self,
        owner: str,
        target: str,
        prompt: str,
        every_seconds: float | None,
        cron: str | None,
        next_at: float,
    ) -> int: ...

    @abstractmethod
    async def for_agents(self, agents: Sequence[str]) -> list[ScheduleRow]:
        """Uncancelled schedules owned by or targeting any of ``agents``."""

    @abstractmethod
    async def all(self) -> list[ScheduleRow]:
        """Every schedule, cancelled ones included, by id."""

    @abstractmethod
    async def due(self, now: float) -> DueWork:
        """Unfired reminders and uncancelled schedules due at ``now``, and the next due time.

        Read only: the caller renders bodies, then calls :meth:`fire`.
        """

    @abstractmethod
    async def fire(
        self,
        now: float,
        sender: str,
        reminders: Sequence[FireReminder],
        schedules: Sequence[FireSchedule],
    ) -> Fired:
        """Deliver them as messages from ``sender`` and mark them fired, in one transaction.

        A reminder already fired or cancelled, or a schedule cancelled or
        moved off ``was_next_at``, is skipped. Wakes every recipient.
        """


class TopologyRepo(ABC):
    """The agent tree: child → parent (``None`` = a root)."""

    @abstractmethod
    async def get(self) -> dict[str, str | None]: ...

    @abstractmethod
    async def set(self, tree: Mapping[str, str | None], note: str) -> DeployEntry:
        """Replace the whole tree and log ``note`` (action ``topology``) with it.

        The rules (no cycle, known parent) are the caller's, in ``topology.py``.
        """


class MetaLogRepo(ABC):
    """Applied agent configs and the deploy log (the meta git repo mirrors it)."""

    @abstractmethod
    async def apply_config(
        self, agent: str, config: str, message: str, action: str = "apply"
    ) -> DeployEntry:
        """Make ``config`` (TOML text) the agent's applied config, and log it."""

    @abstractmethod
    async def remove_config(self, agent: str, message: str) -> DeployEntry:
        """Forget the agent's applied config (action ``remove``), and log it."""

    @abstractmethod
    async def note(
        self, action: str, agent: str | None, message: str, *, text: str | None = None
    ) -> DeployEntry:
        """Log an entry that changes no agent's config (e.g. recorded inputs).

        ``text`` is a file the entry records (the hive's inputs), kept in its ``config``.
        """

    @abstractmethod
    async def adopt(
        self,
        configs: Mapping[str, str],
        tree: Mapping[str, str | None] | None,
        message: str,
    ) -> list[DeployEntry]:
        """Take over an older home's files, once: only into an empty deploy log.

        One transaction: every config (action ``import``), then the tree.
        Returns the entries written; ``[]`` if the log already had any (the
        store, not the files, is then the truth), so a second call, or a
        second coordinator racing the first, changes nothing.
        """

    @abstractmethod
    async def since(self, after_seq: int, limit: int = 500) -> list[DeployEntry]:
        """Entries with ``seq > after_seq``, oldest first: what a mirror has yet to export."""

    @abstractmethod
    async def configs(self) -> dict[str, str]:
        """Every agent's applied config text."""

    @abstractmethod
    async def log(self, limit: int = 50, agent: str | None = None) -> list[DeployEntry]:
        """The newest ``limit`` entries (of ``agent`` if given), newest first."""


def host_taken(name: str) -> Conflict:
    return Conflict(
        f"an agent host named {name!r} already exists; `hivectl hosts rotate {name}` "
        "issues it a new credential"
    )


def host_missing(name: str) -> NotFound:
    return NotFound(f"no agent host named {name!r}; `hivectl hosts list` shows them")


class HostRepo(ABC):
    """Remote agent hosts and the hash of each one's credential (never the secret)."""

    @abstractmethod
    async def add(self, name: str, secret_hash: str, expires_at: float | None = None) -> HostRow:
        """Record a new host whose credential is good until ``expires_at`` (``None``:
        for ever). ``Conflict`` if the name is taken (revoked ones included)."""

    @abstractmethod
    async def get(self, name: str) -> HostRow | None: ...

    @abstractmethod
    async def list(self) -> list[HostRow]:
        """Every host, by name."""

    @abstractmethod
    async def rotate(self, name: str, secret_hash: str, expires_at: float | None = None) -> HostRow:
        """Replace the credential (the old one stops working) with one good until
        ``expires_at`` (``None``: for ever); un-revokes. ``NotFound``."""

    @abstractmethod
    async def revoke(self, name: str) -> HostRow:
        """Refuse the host's credential from now on. ``NotFound``."""

    @abstractmethod
    async def seen(self, name: str, at: float) -> None:
        """Note that the host connected at ``at`` (no-op for an unknown name)."""

    @abstractmethod
    async def new_epoch(self, name: str, expires_at: float) -> int:
        """A registration: the host's link epoch + 1 (monotonic, durable) with a fresh
        lease until ``expires_at``; return the new epoch. ``NotFound``."""

    @abstractmethod
    async def renew(
        self, name: str, epoch: int, at: float, expires_at: float, capacity: str
    ) -> bool:
        """A heartbeat of link ``epoch``: extend its lease, keep its capacity. ``False``
        (nothing written) if a newer registration has superseded ``epoch``."""

    @abstractmethod
    async def claim_loss(self, name: str, epoch: int) -> bool:
        """Record that link ``epoch``'s lease expiry is being handled (durably, before
        anyone is told). ``False``: it was recorded before (by this coordinator or one
        before a failover), or ``epoch`` is not the host's latest."""


def move_missing(agent: str) -> NotFound:
    return NotFound(f"{agent} has no `agents move` in progress (or it was resolved)")


class PlacementRepo(ABC):
    """Which agent host each agent is assigned to (durable: survives a failover), pins,
    and the phase of an ``agents move`` in progress.

    A move is undone before its commit (``commit_move``): until then the agent
    belongs on its source. ``commit_move`` switches the assignment to the target
    and leaves the phase ``cleanup`` until the source has dropped its copy.
    """

    @abstractmethod
    async def get(self, agent: str) -> Assignment | None: ...

    @abstractmethod
    async def all(self) -> list[Assignment]:
        """Every assignment, by agent."""

    @abstractmethod
    async def per_host(self) -> dict[str, int]:
        """How many agents are assigned to each host (hosts with none are absent).

        Placement asks this for every agent it starts: counted by the database, not by
        loading every assignment (a host's registration starting 1,000 agents did that
        1,000 times)."""

    @abstractmethod
    async def assign(self, agent: str, host: str, *, pinned: bool) -> Assignment:
        """Put ``agent`` on ``host`` (replacing any assignment; a move in progress stays)."""

    @abstractmethod
    async def forget(self, agent: str) -> None:
        """Drop ``agent``'s assignment (it was destroyed)."""

    @abstractmethod
    async def begin_move(self, agent: str, move_id: str, target: str) -> Assignment:
        """Record a move of ``agent`` from its host to ``target``, phase ``draining``.
        ``NotFound`` if it has no assignment, ``Conflict`` if a move is in progress."""

    @abstractmethod
    async def move_phase(self, agent: str, move_id: str, phase: str) -> None:
        """Advance the move ``move_id``'s phase (``NotFound``: not that move any more)."""

    @abstractmethod
    async def commit_move(self, agent: str, move_id: str) -> Assignment:
        """The target has the agent: assign it there (keeping the pin), phase ``cleanup``."""

    @abstractmethod
    async def end_move(self, agent: str, move_id: str) -> None:
        """Forget the move ``move_id`` (undone before commit, or its cleanup done)."""


class TrashRepo(ABC):
    """Destroyed agents whose directories wait on an absent host's disk for its trash.

    Durable: a destroy while the agent's host is away must still be carried out when
    the host returns, across coordinator restarts and failovers. One row per name (a
    name is not reused while its old directories are still on a disk).
    """

    @abstractmethod
    async def add(self, agent: str, host: str) -> PendingTrash:
        """Record that ``agent``'s directories on ``host`` are to be trashed."""

    @abstractmethod
    async def get(self, agent: str) -> PendingTrash | None: ...

    @abstractmethod
    async def all(self) -> list[PendingTrash]:
        """Every pending trash, oldest first."""

    @abstractmethod
    async def done(self, agent: str) -> None:
        """``agent``'s trash was carried out (or found nothing to move)."""


class SpendRepo(ABC):
    """What claude runs cost, the run-time budget limits, and which notices were sent.

    Limits configured in files live in the configs; this repository holds the
    operator's run-time overrides (``hivectl budget set``) so they survive a
    restart. ``scope`` is an agent name or ``"*"`` for the whole hive.
    """

    @abstractmethod
    async def record(self, run: SpendRun) -> tuple[SpendEntry, bool]:
        """Count one run at its own figures; ``(its entry, False)`` if its key is known.

        In one transaction: the run's own figures are
        :func:`~hyperhive.runcost.run_cost` of its session's previous totals
        (kept per agent and session id, none for a new session) and the totals
        it reported, which become the session's previous totals. A run already
        recorded changes nothing and hands back what it was counted at.
        """

    @abstractmethod
    async def session_totals(self, agent: str, session_id: str | None) -> dict[str, Figures]:
        """The totals ``agent``'s session last reported, per model (empty: none kept)."""

    @abstractmethod
    async def totals(self, since: float | None = None) -> dict[str, SpendTotal]:
        """Per agent, the spend recorded at or after ``since`` (``None``: all time)."""

    @abstractmethod
    async def series(self, since: float, origin: float, bucket: float) -> list[SpendPoint]:
        """Per agent and bucket, spend at or after ``since``, by bucket then agent.

        Buckets are ``bucket`` seconds long, aligned on ``origin`` (≤ ``since``).
        """

    @abstractmethod
    async def entries(self, agent: str | None = None, limit: int = 100) -> list[SpendEntry]:
        """The newest ``limit`` entries (of ``agent`` if given), newest first."""

    @abstractmethod
    async def overrides(self) -> dict[str, dict[str, float | None]]:
        """Every scope's run-time limit overrides (a key set to ``None`` = unlimited)."""

    @abstractmethod
    async def set_overrides(self, scope: str, limits: Mapping[str, float | None]) -> None:
        """Replace ``scope``'s overrides; an empty mapping drops them (configs rule again)."""

    @abstractmethod
    async def mark_notice(self, scope: str, marker: str) -> bool:
        """Remember a notice sent; ``False`` if ``(scope, marker)`` was already sent."""


class ActivityRepo(ABC):
    """What the hive did, one row per event, for the dashboard's feed.

    Written by the coordinator where each event happens; messages stay in
    their own table (the feed merges both). Bounded by :meth:`prune`.
    """

    @abstractmethod
    async def record(
        self,
        kind: str,
        agent: str,
        title: str,
        *,
        others: Sequence[str] = (),
        detail: Mapping[str, Any] | None = None,
        key: str | None = None,
        at: float | None = None,
    ) -> ActivityRow | None:
        """Store one event (``at`` defaults to now); ``None`` if ``key`` is already known.

        ``key`` makes a resent report (a turn_end after a restart) land once.
        """

    @abstractmethod
    async def page(
        self,
        before: FeedCursor | None = None,
        limit: int = 50,
        *,
        agent: str | None = None,
        kind: str | None = None,
    ) -> list[ActivityRow]:
        """Newest first by ``(at, id)``: up to ``limit`` rows strictly before ``before``,
        of ``kind`` and concerning ``agent`` (actor or other) when given. Index walks."""

    @abstractmethod
    async def prune(self, older_than: float) -> int:
        """Delete the rows with ``at < older_than``; return how many."""


class SettingsRepo(ABC):
    """The hive's own few durable values (its id), shared by every coordinator of it:
    on PostgreSQL two coordinators on different machines read the same row."""

    @abstractmethod
    async def get(self, key: str) -> str | None:
        """``key``'s value, or ``None`` if none is kept."""

    @abstractmethod
    async def keep(self, key: str, value: str) -> str:
        """Keep ``value`` under ``key`` unless a value is kept there already; the kept
        value either way (the first to keep one wins, atomically)."""


class Store(ABC):
    """One hive's durable state. Open with ``hyperhive.store.open_store``."""

    messages: MessageRepo
    agents: AgentRepo
    loose_ends: LooseEndRepo
    approvals: ApprovalRepo
    schedules: ScheduleRepo
    topology: TopologyRepo
    meta: MetaLogRepo
    hosts: HostRepo
    placements: PlacementRepo
    trash: TrashRepo

    spend: SpendRepo
    activity: ActivityRepo
    settings: SettingsRepo

    #: The schema version the store is at after opening (both backends number alike).
    schema_version: int

    def __init__(self) -> None:
        self._feed = ChangeFeed()

    def on_change(self, callback: ChangeCallback) -> Callable[[], None]:
        """Call ``callback(agent)`` after each commit that adds something for ``agent``.

        Runs on the event loop that made the change (SQLite) or that listens
        (PostgreSQL). Returns an unsubscribe function.
        """
        return self._feed.subscribe(callback)

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the data lives, safe to log (a path, or a URL without its password)."""

    @abstractmethod
    async def close(self) -> None:
        """Finish work in flight, then release the database."""
