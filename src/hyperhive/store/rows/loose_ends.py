"""Loose ends: what an agent left open (reminders, todos, approvals, questions, schedules)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hyperhive.store.rows.approvals import ApprovalRow

__all__ = [
    "LooseEndKind",
    "LooseEndRow",
    "OpenLooseEnds",
    "QuestionRow",
    "QuestionState",
    "ReminderRow",
    "ScheduleRow",
    "TodoRow",
]


LooseEndKind = Literal["reminder", "todo", "approval", "question", "schedule"]


QuestionState = Literal["open", "answered", "cancelled"]


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
