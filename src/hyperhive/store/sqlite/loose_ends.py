"""Reminders, todos, operator questions, and the cross-kind view on SQLite."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any

from hyperhive.errors import Conflict, LimitExceeded, NotFound
from hyperhive.store.base import LooseEndRepo
from hyperhive.store.rows import (
    LooseEndKind,
    LooseEndRow,
    OpenLooseEnds,
    QuestionRow,
    ReminderRow,
    TodoRow,
)
from hyperhive.store.sqlite import rowmap
from hyperhive.store.sqlite.common import ensure_agent, insert_message, placeholders
from hyperhive.store.sqlite.engine import Engine, Tx

__all__ = ["SqliteLooseEnds"]

# kind → (table, the column naming the row's agent, "open" condition, order, mapping)
_KINDS: dict[LooseEndKind, tuple[str, str, str, str, Callable[[sqlite3.Row], Any]]] = {
    "reminder": ("reminders", "agent", "fired_at IS NULL", "due_at, id", rowmap.reminder),
    "todo": ("todos", "agent", "1", "id", rowmap.todo),
    "approval": ("approvals", "requester", "state = 'pending'", "id", rowmap.approval),
    "question": ("questions", "asker", "state = 'open'", "id", rowmap.question),
    "schedule": ("schedules", "target", "cancelled_at IS NULL", "id", rowmap.schedule),
}

_CANCEL: dict[LooseEndKind, str] = {
    "reminder": "DELETE FROM reminders WHERE id = ? AND fired_at IS NULL",
    "todo": "DELETE FROM todos WHERE id = ?",
    "approval": "UPDATE approvals SET state = 'cancelled', resolved_at = ?1 "
    "WHERE id = ?2 AND state = 'pending'",
    "question": "UPDATE questions SET state = 'cancelled', answered_at = ?1 "
    "WHERE id = ?2 AND state = 'open'",
    "schedule": "UPDATE schedules SET cancelled_at = ?1 WHERE id = ?2 AND cancelled_at IS NULL",
}


class SqliteLooseEnds(LooseEndRepo):
    def __init__(self, engine: Engine) -> None:
        self._db = engine

    async def remind(self, agent: str, message: str, due_at: float, max_pending: int) -> int:
        def op(tx: Tx) -> int:
            row = tx.one(
                "SELECT COUNT(*) FROM reminders WHERE agent = ? AND fired_at IS NULL", (agent,)
            )
            pending = int(row[0]) if row else 0
            if pending >= max_pending:
                raise LimitExceeded(
                    f"{agent} already has {pending} pending reminders (the limit is "
                    f"{max_pending}); cancel some with cancel_loose_end(kind='reminder', id=…) "
                    "first"
                )
            return tx.insert(
                "INSERT INTO reminders(agent, message, due_at, created_at) VALUES (?, ?, ?, ?)",
                (agent, message, due_at, time.time()),
            )

        return await self._db.run(op)

    async def todo_upsert(
        self, agent: str, subsystem: str, key: str, body: str, *, wake: bool = True
    ) -> int:
        def op(tx: Tx) -> int:
            ensure_agent(tx, agent)
            now = time.time()
            version = 0
            if wake:
                bumped = tx.one(
                    "UPDATE agent_state SET todo_version = todo_version + 1 WHERE name = ? "
                    "RETURNING todo_version",
                    (agent,),
                )
                assert bumped is not None
                version = int(bumped[0])
            row = tx.one(
                "INSERT INTO todos(agent, subsystem, key, body, created_at, updated_at, version) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(agent, subsystem, key) "
                "DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at, "
                "version = excluded.version RETURNING id",
                (agent, subsystem, key, body, now, now, version),
            )
            assert row is not None
            if wake:
                tx.wake(agent)
            return int(row[0])

        return await self._db.run(op)

    async def todo_clear(self, agent: str, subsystem: str, key: str) -> bool:
        return await self._db.run(
            lambda tx: (
                tx.execute(
                    "DELETE FROM todos WHERE agent = ? AND subsystem = ? AND key = ?",
                    (agent, subsystem, key),
                ).rowcount
                > 0
            )
        )

    async def ask(self, asker: str, question: str, recipient: str, body: str) -> tuple[int, int]:
        def op(tx: Tx) -> tuple[int, int]:
            msg_id = insert_message(tx, asker, recipient, body, None)
            qid = tx.insert(
                "INSERT INTO questions(asker, question, message_id, created_at) VALUES (?,?,?,?)",
                (asker, question, msg_id, time.time()),
            )
            return qid, msg_id

        return await self._db.run(op)

    async def answer(self, question_id: int, answer: str, sender: str) -> tuple[QuestionRow, int]:
        def op(tx: Tx) -> tuple[QuestionRow, int]:
            row = tx.one("SELECT * FROM questions WHERE id = ?", (question_id,))
            if row is None:
                raise NotFound(f"no question #{question_id}; `hivectl questions list` shows them")
            if row["state"] != "open":
                raise Conflict(f"question #{question_id} is already {row['state']}")
            updated = tx.one(
                "UPDATE questions SET state = 'answered', answer = ?, answered_at = ? "
                "WHERE id = ? RETURNING *",
                (answer, time.time(), question_id),
            )
            assert updated is not None
            msg_id = insert_message(tx, sender, row["asker"], answer, row["message_id"])
            return rowmap.question(updated), msg_id

        return await self._db.run(op)

    async def questions(self, open_only: bool = True) -> list[QuestionRow]:
        where = "WHERE state = 'open'" if open_only else ""
        rows = await self._db.run(
            lambda tx: tx.all(f"SELECT * FROM questions {where} ORDER BY id"), durable=False
        )
        return [rowmap.question(r) for r in rows]

    async def reminders(self, include_fired: bool = False) -> list[ReminderRow]:
        where = "" if include_fired else "WHERE fired_at IS NULL"
        rows = await self._db.run(
            lambda tx: tx.all(f"SELECT * FROM reminders {where} ORDER BY id"), durable=False
        )
        return [rowmap.reminder(r) for r in rows]

    async def todos(self, agent: str | None = None) -> list[TodoRow]:
        where, args = ("WHERE agent = ?", (agent,)) if agent is not None else ("", ())
        rows = await self._db.run(
            lambda tx: tx.all(f"SELECT * FROM todos {where} ORDER BY id", args), durable=False
        )
        return [rowmap.todo(r) for r in rows]

    async def get(self, kind: LooseEndKind, row_id: int) -> LooseEndRow | None:
        table, *_, mapping = _KINDS[kind]
        row = await self._db.run(
            lambda tx: tx.one(f"SELECT * FROM {table} WHERE id = ?", (row_id,)), durable=False
        )
        result: LooseEndRow | None = None if row is None else mapping(row)
        return result

    async def cancel(self, kind: LooseEndKind, row_id: int) -> bool:
        sql = _CANCEL[kind]
        params: tuple[object, ...] = (
            (row_id,) if kind in ("reminder", "todo") else (time.time(), row_id)
        )
        return await self._db.run(lambda tx: tx.execute(sql, params).rowcount > 0)

    async def open(self, agents: Sequence[str] | None = None) -> OpenLooseEnds:
        def op(tx: Tx) -> OpenLooseEnds:
            found: dict[LooseEndKind, tuple[Any, ...]] = {}
            for kind, (table, column, is_open, order, mapping) in _KINDS.items():
                cond, args = "1", tuple[str, ...]()  # typed: reassigned to agents below
                if agents is not None:
                    cond, args = f"{column} IN ({placeholders(len(agents))})", tuple(agents)
                rows = tx.all(
                    f"SELECT * FROM {table} WHERE {is_open} AND {cond} ORDER BY {order}", args
                )
                found[kind] = tuple(mapping(r) for r in rows)
            return OpenLooseEnds(
                reminders=found["reminder"],
                todos=found["todo"],
                approvals=found["approval"],
                questions=found["question"],
                schedules=found["schedule"],
            )

        return await self._db.run(op, durable=False)
