"""SQLite rows of the loose-end tables as the store's typed rows."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, cast

from hyperhive.store.rows import (
    ApprovalRow,
    ApprovalState,
    QuestionRow,
    QuestionState,
    ReminderRow,
    ScheduleRow,
    TodoRow,
)

__all__ = ["approval", "question", "reminder", "schedule", "todo"]


def reminder(r: sqlite3.Row) -> ReminderRow:
    return ReminderRow(
        id=r["id"],
        agent=r["agent"],
        message=r["message"],
        due_at=r["due_at"],
        created_at=r["created_at"],
        fired_at=r["fired_at"],
    )


def todo(r: sqlite3.Row) -> TodoRow:
    return TodoRow(
        id=r["id"],
        agent=r["agent"],
        subsystem=r["subsystem"],
        key=r["key"],
        body=r["body"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
    )


def approval(r: sqlite3.Row) -> ApprovalRow:
    payload: dict[str, Any] = json.loads(r["payload"])
    return ApprovalRow(
        id=r["id"],
        kind=r["kind"],
        requester=r["requester"],
        subject=r["subject"],
        payload=payload,
        state=cast(ApprovalState, r["state"]),
        created_at=r["created_at"],
        resolved_at=r["resolved_at"],
        resolution=r["resolution"],
    )


def question(r: sqlite3.Row) -> QuestionRow:
    return QuestionRow(
        id=r["id"],
        asker=r["asker"],
        question=r["question"],
        message_id=r["message_id"],
        state=cast(QuestionState, r["state"]),
        created_at=r["created_at"],
        answer=r["answer"],
        answered_at=r["answered_at"],
    )


def schedule(r: sqlite3.Row) -> ScheduleRow:
    return ScheduleRow(
        id=r["id"],
        owner=r["owner"],
        target=r["target"],
        prompt=r["prompt"],
        every_seconds=r["every_seconds"],
        cron=r["cron"],
        next_at=r["next_at"],
        created_at=r["created_at"],
        cancelled_at=r["cancelled_at"],
    )
