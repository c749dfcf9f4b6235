"""SQLite rows as the store's typed rows: columns are named as the row's fields."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import fields
from typing import TYPE_CHECKING, Any, TypeVar

from hyperhive.store.rows import (
    AgentState,
    ApprovalRow,
    MessageRow,
    QuestionRow,
    ReminderRow,
    ScheduleRow,
    TodoRow,
)

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "agent_state",
    "approval",
    "from_row",
    "message_row",
    "question",
    "reminder",
    "schedule",
    "todo",
]

_R = TypeVar("_R", bound="DataclassInstance")

# agent_state keeps its flags as SQLite integers.
_AGENT_FLAGS = ("fenced", "compact_pending", "desired_running", "needs_login")


def from_row(cls: type[_R], r: sqlite3.Row, **converted: Any) -> _R:
    """``cls`` from a row holding a column per field; ``converted`` replaces some."""
    values = {f.name: r[f.name] for f in fields(cls) if f.name not in converted}
    return cls(**values, **converted)


def message_row(r: sqlite3.Row) -> MessageRow:
    return from_row(MessageRow, r)


def agent_state(r: sqlite3.Row) -> AgentState:
    return from_row(AgentState, r, **{flag: bool(r[flag]) for flag in _AGENT_FLAGS})


def reminder(r: sqlite3.Row) -> ReminderRow:
    return from_row(ReminderRow, r)


def todo(r: sqlite3.Row) -> TodoRow:
    return from_row(TodoRow, r)


def approval(r: sqlite3.Row) -> ApprovalRow:
    return from_row(ApprovalRow, r, payload=json.loads(r["payload"]))


def question(r: sqlite3.Row) -> QuestionRow:
    return from_row(QuestionRow, r)


def schedule(r: sqlite3.Row) -> ScheduleRow:
    return from_row(ScheduleRow, r)
