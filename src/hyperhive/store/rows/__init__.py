"""Typed rows the store hands out: one frozen dataclass per stored thing.

Pure data, no I/O and no backend types: a row read from SQLite and the same
row read from PostgreSQL compare equal. Times are Unix seconds (``float``).
One module per aggregate, named like its repository's in ``store/base/``; this
package re-exports them all, so callers import from ``hyperhive.store.rows``.
"""

from __future__ import annotations

from hyperhive.store.rows.activity import ActivityRow
from hyperhive.store.rows.agents import AgentState, CompactRequest, TurnRecord
from hyperhive.store.rows.approvals import ApprovalRow, ApprovalState
from hyperhive.store.rows.hosts import HostRow
from hyperhive.store.rows.loose_ends import (
    LooseEndKind,
    LooseEndRow,
    OpenLooseEnds,
    QuestionRow,
    QuestionState,
    ReminderRow,
    ScheduleRow,
    TodoRow,
)
from hyperhive.store.rows.messages import MessageCounts, MessageRow, Poll, Recv
from hyperhive.store.rows.metalog import DeployEntry
from hyperhive.store.rows.placements import Assignment
from hyperhive.store.rows.schedules import DueWork, Fired, FireReminder, FireSchedule
from hyperhive.store.rows.snapshots import SnapshotHead, StoredSnapshot
from hyperhive.store.rows.spend import SpendEntry, SpendPoint, SpendRun, SpendTotal
from hyperhive.store.rows.trash import PendingTrash

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
    "SnapshotHead",
    "SpendEntry",
    "StoredSnapshot",
    "SpendPoint",
    "SpendRun",
    "SpendTotal",
    "TodoRow",
    "TurnRecord",
]
