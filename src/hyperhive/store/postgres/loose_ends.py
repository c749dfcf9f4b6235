"""Reminders, todos, operator questions and the loose-ends view on PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hyperhive.errors import Conflict, InvalidRequest, LimitExceeded, NotFound
from hyperhive.store.base import LooseEndRepo
from hyperhive.store.postgres._repo import Conn, PgRepo, ensure_agent, now
from hyperhive.store.postgres.messages import insert_message
from hyperhive.store.rows import (
    ApprovalRow,
    LooseEndKind,
    LooseEndRow,
    OpenLooseEnds,
    QuestionRow,
    ReminderRow,
    ScheduleRow,
    TodoRow,
)

__all__ = [
    "APPROVAL_COLS",
    "PgLooseEnds",
    "QUESTION_COLS",
    "REMINDER_COLS",
    "SCHEDULE_COLS",
    "approval_row",
    "schedule_row",
]

REMINDER_COLS = "id, agent, message, due_at, created_at, fired_at"
TODO_COLS = "id, agent, subsystem, key, body, created_at, updated_at"
APPROVAL_COLS = "id, kind, requester, subject, payload, state, created_at, resolved_at, resolution"
QUESTION_COLS = "id, asker, question, message_id, state, created_at, answer, answered_at"
SCHEDULE_COLS = "id, owner, target, prompt, every_seconds, cron, next_at, created_at, cancelled_at"


def approval_row(r: tuple[Any, ...]) -> ApprovalRow:
    return ApprovalRow(r[0], r[1], r[2], r[3], json.loads(r[4]), *r[5:])


def schedule_row(r: tuple[Any, ...]) -> ScheduleRow:
    return ScheduleRow(*r)


# kind → (table, columns, row builder, the column naming its agent, "open" condition, order)
_KINDS: dict[str, tuple[str, str, Any, str, str, str]] = {
    "reminder": (
        "reminders",
        REMINDER_COLS,
        lambda r: ReminderRow(*r),
        "agent",
        "fired_at IS NULL",
        "due_at, id",
    ),
    "todo": ("todos", TODO_COLS, lambda r: TodoRow(*r), "agent", "TRUE", "id"),
    "approval": ("approvals", APPROVAL_COLS, approval_row, "requester", "state = 'pending'", "id"),
    "question": (
        "questions",
        QUESTION_COLS,
        lambda r: QuestionRow(*r),
        "asker",
        "state = 'open'",
        "id",
    ),
    "schedule": ("schedules", SCHEDULE_COLS, schedule_row, "target", "cancelled_at IS NULL", "id"),
}

_CANCEL = {
    "reminder": "DELETE FROM reminders WHERE id = %(id)s AND fired_at IS NULL",
    "todo": "DELETE FROM todos WHERE id = %(id)s",
    "approval": "UPDATE approvals SET state = 'cancelled', resolved_at = %(at)s "
    "WHERE id = %(id)s AND state = 'pending'",
    "question": "UPDATE questions SET state = 'cancelled', answered_at = %(at)s "
    "WHERE id = %(id)s AND state = 'open'",
    "schedule": "UPDATE schedules SET cancelled_at = %(at)s "
    "WHERE id = %(id)s AND cancelled_at IS NULL",
}


async def _bump_todos(conn: Conn, agent: str) -> int:
    """Bump the agent's ``todo_version``; return the new one."""
    await ensure_agent(conn, agent)
    cur = await conn.execute(
        "UPDATE agent_state SET todo_version = todo_version + 1 WHERE name = %s "
        "RETURNING todo_version",
        (agent,),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


class PgLooseEnds(PgRepo, LooseEndRepo):
    async def remind(self, agent: str, message: str, due_at: float, max_pending: int) -> int:
        async def op(conn: Conn) -> int:
            # The agent's state row is the per-agent lock: two concurrent reminders
            # cannot both slip under the limit.
            await ensure_agent(conn, agent)
            await conn.execute("SELECT 1 FROM agent_state WHERE name = %s FOR UPDATE", (agent,))
            cur = await conn.execute(
                "SELECT count(*) FROM reminders WHERE agent = %s AND fired_at IS NULL", (agent,)
            )
            row = await cur.fetchone()
            pending = int(row[0]) if row else 0
            if pending >= max_pending:
                raise LimitExceeded(
                    f"{agent} already has {pending} pending reminders (the limit is "
                    f"{max_pending}); cancel some with cancel_loose_end(kind='reminder', id=…) "
                    "first"
                )
            cur = await conn.execute(
                "INSERT INTO reminders(agent, message, due_at, created_at) "
                "VALUES (%s, %s, %s, %s) RETURNING id",
                (agent, message, due_at, now()),
            )
            new = await cur.fetchone()
            assert new is not None
            return int(new[0])

        return await self._tx(op)

    async def todo_upsert(
        self, agent: str, subsystem: str, key: str, body: str, *, wake: bool = True
    ) -> int:
        async def op(conn: Conn, woken: set[str]) -> int:
            at = now()
            version = 0
            if wake:
                version = await _bump_todos(conn, agent)
                woken.add(agent)
            else:
                await ensure_agent(conn, agent)
            cur = await conn.execute(
                "INSERT INTO todos(agent, subsystem, key, body, created_at, updated_at, version) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (agent, subsystem, key) "
                "DO UPDATE SET body = EXCLUDED.body, updated_at = EXCLUDED.updated_at, "
                "version = EXCLUDED.version RETURNING id",
                (agent, subsystem, key, body, at, at, version),
            )
            row = await cur.fetchone()
            assert row is not None
            return int(row[0])

        return await self._tx_waking(op)

    async def todo_clear(self, agent: str, subsystem: str, key: str) -> bool:
        # No bump and no wake: a cleared todo is no net change a waiter should see
        # (the rule SQLite keeps too; see ``MessageRepo.poll``).
        async def op(conn: Conn) -> bool:
            cur = await conn.execute(
                "DELETE FROM todos WHERE agent = %s AND subsystem = %s AND key = %s",
                (agent, subsystem, key),
            )
            return cur.rowcount > 0

        return await self._tx(op)

    async def ask(self, asker: str, question: str, recipient: str, body: str) -> tuple[int, int]:
        async def op(conn: Conn, woken: set[str]) -> tuple[int, int]:
            msg_id = await insert_message(conn, asker, recipient, body, None)
            cur = await conn.execute(
                "INSERT INTO questions(asker, question, message_id, created_at) "
                "VALUES (%s, %s, %s, %s) RETURNING id",
                (asker, question, msg_id, now()),
            )
            row = await cur.fetchone()
            assert row is not None
            woken.add(recipient)
            return int(row[0]), msg_id

        return await self._tx_waking(op)

    async def answer(self, question_id: int, answer: str, sender: str) -> tuple[QuestionRow, int]:
        async def op(conn: Conn, woken: set[str]) -> tuple[QuestionRow, int]:
            cur = await conn.execute(
                f"SELECT {QUESTION_COLS} FROM questions WHERE id = %s FOR UPDATE", (question_id,)
            )
            found = await cur.fetchone()
            if found is None:
                raise NotFound(f"no question #{question_id}; `hivectl questions list` shows them")
            row = QuestionRow(*found)
            if row.state != "open":
                raise Conflict(f"question #{question_id} is already {row.state}")
            cur = await conn.execute(
                "UPDATE questions SET state = 'answered', answer = %s, answered_at = %s "
                f"WHERE id = %s RETURNING {QUESTION_COLS}",
                (answer, now(), question_id),
            )
            updated = await cur.fetchone()
            assert updated is not None
            msg_id = await insert_message(conn, sender, row.asker, answer, row.message_id)
            woken.add(row.asker)
            return QuestionRow(*updated), msg_id

        return await self._tx_waking(op)

    async def questions(self, open_only: bool = True) -> list[QuestionRow]:
        where = "WHERE state = 'open' " if open_only else ""
        rows = await self._read(f"SELECT {QUESTION_COLS} FROM questions {where}ORDER BY id")
        return [QuestionRow(*r) for r in rows]

    async def reminders(self, include_fired: bool = False) -> list[ReminderRow]:
        where = "" if include_fired else "WHERE fired_at IS NULL "
        rows = await self._read(f"SELECT {REMINDER_COLS} FROM reminders {where}ORDER BY id")
        return [ReminderRow(*r) for r in rows]

    async def todos(self, agent: str | None = None) -> list[TodoRow]:
        if agent is None:
            rows = await self._read(f"SELECT {TODO_COLS} FROM todos ORDER BY id")
        else:
            rows = await self._read(
                f"SELECT {TODO_COLS} FROM todos WHERE agent = %s ORDER BY id", (agent,)
            )
        return [TodoRow(*r) for r in rows]

    async def get(self, kind: LooseEndKind, row_id: int) -> LooseEndRow | None:
        table, cols, build, *_ = _kinds(kind)
        rows = await self._read(f"SELECT {cols} FROM {table} WHERE id = %s", (row_id,))
        return build(rows[0]) if rows else None

    async def cancel(self, kind: LooseEndKind, row_id: int) -> bool:
        _kinds(kind)

        async def op(conn: Conn) -> bool:
            cur = await conn.execute(_CANCEL[kind], {"id": row_id, "at": now()})
            return cur.rowcount > 0

        return await self._db.one(op)

    async def open(self, agents: Sequence[str] | None = None) -> OpenLooseEnds:
        async def op(conn: Conn) -> OpenLooseEnds:
            out: dict[str, tuple[Any, ...]] = {}
            for kind in _KINDS:
                table, cols, build, agent_col, is_open, order = _KINDS[kind]
                cond = "TRUE" if agents is None else f"{agent_col} = ANY(%s)"
                params: tuple[Any, ...] = () if agents is None else (list(agents),)
                cur = await conn.execute(
                    f"SELECT {cols} FROM {table} WHERE {is_open} AND {cond} ORDER BY {order}",
                    params,
                )
                out[kind] = tuple(build(r) for r in await cur.fetchall())
            return OpenLooseEnds(
                reminders=out["reminder"],
                todos=out["todo"],
                approvals=out["approval"],
                questions=out["question"],
                schedules=out["schedule"],
            )

        # REPEATABLE READ: the five kinds are read from one snapshot.
        return await self._db.snapshot(op)


def _kinds(kind: str) -> tuple[str, str, Any, str, str, str]:
    try:
        return _KINDS[kind]
    except KeyError:
        raise InvalidRequest(
            f"unknown loose-end kind {kind!r}: use one of {', '.join(_KINDS)}"
        ) from None
