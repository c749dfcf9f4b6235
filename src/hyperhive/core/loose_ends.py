"""Loose ends: reminders, todos, approvals, operator questions, schedules.

Storage and queries only; who may see or cancel what is decided by the
caller (``agent_api``) from the topology. A todo change bumps the agent's
``todo_version`` and wakes its ``wait``.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from croniter import croniter

from hyperhive.core.broker import ensure_agent_row, insert_message
from hyperhive.core.db import Database
from hyperhive.core.notify import Notifier
from hyperhive.errors import InvalidRequest, LimitExceeded, NotFound
from hyperhive.names import OPERATOR
from hyperhive.protocol import LooseEnd, LooseEndKind

__all__ = ["LooseEnds", "next_cron"]

SUMMARY_CHARS = 200


def next_cron(expr: str, after: float) -> float:
    """The next firing of a cron expression strictly after ``after`` (UTC)."""
    if not croniter.is_valid(expr):
        raise InvalidRequest(f"cron {expr!r} is not a valid 5-field cron expression")
    base = datetime.fromtimestamp(after, UTC)
    return float(croniter(expr, base).get_next(float))


def _summary(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= SUMMARY_CHARS else line[: SUMMARY_CHARS - 1] + "…"


class LooseEnds:
    def __init__(self, db: Database, notifier: Notifier, max_pending_reminders: int) -> None:
        self.db = db
        self.notifier = notifier
        self.max_pending_reminders = max_pending_reminders

    # ---- reminders ----------------------------------------------------------

    async def remind(self, agent: str, message: str, due_at: float) -> int:
        limit = self.max_pending_reminders

        def op(conn: sqlite3.Connection) -> int:
            (pending,) = conn.execute(
                "SELECT COUNT(*) FROM reminders WHERE agent = ? AND fired_at IS NULL", (agent,)
            ).fetchone()
            if pending >= limit:
                raise LimitExceeded(
                    f"{agent} already has {pending} pending reminders (the limit is {limit}); "
                    "cancel some with cancel_loose_end(kind='reminder', id=…) first"
                )
            cur = conn.execute(
                "INSERT INTO reminders(agent, message, due_at, created_at) VALUES (?, ?, ?, ?)",
                (agent, message, due_at, time.time()),
            )
            assert cur.lastrowid is not None
            return cur.lastrowid

        return await self.db.run(op)

    # ---- todos --------------------------------------------------------------

    async def todo_upsert(self, agent: str, subsystem: str, key: str, body: str) -> int:
        def op(conn: sqlite3.Connection) -> int:
            ensure_agent_row(conn, agent)
            now = time.time()
            conn.execute(
                "INSERT INTO todos(agent, subsystem, key, body, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(agent, subsystem, key) "
                "DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at",
                (agent, subsystem, key, body, now, now),
            )
            conn.execute(
                "UPDATE agent_state SET todo_version = todo_version + 1 WHERE name = ?", (agent,)
            )
            row = conn.execute(
                "SELECT id FROM todos WHERE agent = ? AND subsystem = ? AND key = ?",
                (agent, subsystem, key),
            ).fetchone()
            return int(row[0])

        todo_id = await self.db.run(op)
        self.notifier.notify(agent)
        return todo_id

    async def todo_clear(self, agent: str, subsystem: str, key: str) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            gone = conn.execute(
                "DELETE FROM todos WHERE agent = ? AND subsystem = ? AND key = ?",
                (agent, subsystem, key),
            ).rowcount
            return gone > 0

        return await self.db.run(op)

    # ---- questions ----------------------------------------------------------

    async def ask_operator(self, asker: str, question: str) -> tuple[int, int]:
        """A question row plus its message in the operator's inbox: (question, message) ids."""

        def op(conn: sqlite3.Connection) -> tuple[int, int]:
            msg_id = insert_message(conn, asker, OPERATOR, f"[question] {question}", None)
            cur = conn.execute(
                "INSERT INTO questions(asker, question, message_id, created_at) VALUES (?,?,?,?)",
                (asker, question, msg_id, time.time()),
            )
            assert cur.lastrowid is not None
            return cur.lastrowid, msg_id

        ids = await self.db.run(op)
        self.notifier.notify(OPERATOR)
        return ids

    async def answer_question(self, question_id: int, answer: str) -> tuple[str, int]:
        """Close a question; the answer goes to the asker in reply to it."""

        def op(conn: sqlite3.Connection) -> tuple[str, int]:
            row = conn.execute("SELECT * FROM questions WHERE id = ?", (question_id,)).fetchone()
            if row is None:
                raise NotFound(f"no question #{question_id}; `hivectl questions list` shows them")
            if row["state"] != "open":
                raise InvalidRequest(f"question #{question_id} is already {row['state']}")
            conn.execute(
                "UPDATE questions SET state = 'answered', answer = ?, answered_at = ? WHERE id = ?",
                (answer, time.time(), question_id),
            )
            msg_id = insert_message(conn, OPERATOR, row["asker"], answer, row["message_id"])
            return str(row["asker"]), msg_id

        asker, msg_id = await self.db.run(op)
        self.notifier.notify(asker)
        return asker, msg_id

    async def questions(self, open_only: bool = True) -> list[dict[str, object]]:
        where = "WHERE state = 'open'" if open_only else ""
        rows = await self.db.run(
            lambda c: c.execute(f"SELECT * FROM questions {where} ORDER BY id").fetchall()
        )
        return [dict(r) for r in rows]

    # ---- approvals ----------------------------------------------------------

    async def create_approval(
        self, kind: str, requester: str, subject: str, payload: dict[str, object]
    ) -> int:
        def op(conn: sqlite3.Connection) -> int:
            cur = conn.execute(
                "INSERT INTO approvals(kind, requester, subject, payload, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (kind, requester, subject, json.dumps(payload), time.time()),
            )
            assert cur.lastrowid is not None
            return cur.lastrowid

        return await self.db.run(op)

    # ---- schedules ----------------------------------------------------------

    async def schedule(
        self, owner: str, target: str, prompt: str, every: float | None, cron: str | None
    ) -> int:
        now = time.time()
        next_at = now + every if every is not None else next_cron(cron or "", now)

        def op(conn: sqlite3.Connection) -> int:
            cur = conn.execute(
                "INSERT INTO schedules(owner, target, prompt, every_seconds, cron, next_at, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (owner, target, prompt, every, cron, next_at, now),
            )
            assert cur.lastrowid is not None
            return cur.lastrowid

        return await self.db.run(op)

    async def schedules_for(self, agents: list[str]) -> list[dict[str, object]]:
        marks = ",".join("?" * len(agents))
        rows = await self.db.run(
            lambda c: c.execute(
                f"SELECT * FROM schedules WHERE cancelled_at IS NULL AND "
                f"(owner IN ({marks}) OR target IN ({marks})) ORDER BY id",
                (*agents, *agents),
            ).fetchall()
        )
        return [dict(r) for r in rows]

    async def row(self, kind: str, row_id: int) -> sqlite3.Row | None:
        table = _TABLES[kind]
        result: sqlite3.Row | None = await self.db.run(
            lambda c: c.execute(f"SELECT * FROM {table} WHERE id = ?", (row_id,)).fetchone()
        )
        return result

    async def cancel(self, kind: str, row_id: int) -> bool:
        """Cancel one row (ownership already checked by the caller)."""
        now = time.time()
        sql = {
            "reminder": "DELETE FROM reminders WHERE id = ? AND fired_at IS NULL",
            "todo": "DELETE FROM todos WHERE id = ?",
            "approval": "UPDATE approvals SET state = 'cancelled', resolved_at = ? "
            "WHERE id = ? AND state = 'pending'",
            "question": "UPDATE questions SET state = 'cancelled', answered_at = ? "
            "WHERE id = ? AND state = 'open'",
            "schedule": "UPDATE schedules SET cancelled_at = ? WHERE id = ? "
            "AND cancelled_at IS NULL",
        }[kind]
        params: tuple[object, ...] = (row_id,) if kind in ("reminder", "todo") else (now, row_id)
        return bool(await self.db.run(lambda c: c.execute(sql, params).rowcount))

    # ---- the loose-ends view ------------------------------------------------

    async def list_for(self, agents: list[str] | None) -> list[LooseEnd]:
        """Every open loose end of ``agents`` (None = the whole hive)."""

        def op(conn: sqlite3.Connection) -> list[LooseEnd]:
            out: list[LooseEnd] = []
            for view in _VIEWS:
                cond = "1"
                args: tuple[str, ...] = ()
                if agents is not None:
                    cond = f"{view.agent} IN ({','.join('?' * len(agents))})"
                    args = tuple(agents)
                sql = (
                    f"SELECT * FROM {view.table} WHERE {view.open} AND {cond} ORDER BY {view.order}"
                )
                out.extend(view.row(r) for r in conn.execute(sql, args))
            return out

        return await self.db.run(op)


@dataclass(frozen=True)
class _View:
    """How one table's open rows become loose ends."""

    kind: LooseEndKind
    table: str
    agent: str  # the column naming the agent the row belongs to in this view
    open: str
    order: str
    summary: Callable[[sqlite3.Row], str]
    extra: Callable[[sqlite3.Row], dict[str, object]]

    def row(self, r: sqlite3.Row) -> LooseEnd:
        return LooseEnd(
            kind=self.kind,
            id=r["id"],
            agent=r[self.agent],
            summary=_summary(self.summary(r)),
            created_at=r["created_at"],
            **self.extra(r),
        )


_VIEWS = (
    _View(
        "reminder",
        "reminders",
        "agent",
        "fired_at IS NULL",
        "due_at",
        lambda r: r["message"],
        lambda r: {"due_at": r["due_at"]},
    ),
    _View(
        "todo",
        "todos",
        "agent",
        "1",
        "id",
        lambda r: r["body"],
        lambda r: {"subsystem": r["subsystem"], "key": r["key"]},
    ),
    _View(
        "approval",
        "approvals",
        "requester",
        "state = 'pending'",
        "id",
        lambda r: f"{r['kind']}: {r['subject']}",
        lambda r: {"state": r["state"]},
    ),
    _View(
        "question",
        "questions",
        "asker",
        "state = 'open'",
        "id",
        lambda r: r["question"],
        lambda r: {"state": r["state"]},
    ),
    _View(
        "schedule",
        "schedules",
        "target",
        "cancelled_at IS NULL",
        "id",
        lambda r: r["prompt"],
        lambda r: {"due_at": r["next_at"]},
    ),
)


_TABLES = {
    "reminder": "reminders",
    "todo": "todos",
    "approval": "approvals",
    "question": "questions",
    "schedule": "schedules",
}

OWNER_COLUMN = {
    "reminder": "agent",
    "todo": "agent",
    "approval": "requester",
    "question": "asker",
    "schedule": "owner",
}
