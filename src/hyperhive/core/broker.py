"""The durable mailbox: send, recv, ack, and the harness's long-poll ``wait``.

Delivery is at-least-once. A row handed to an agent (``recv`` or ``wait``)
is *delivered*; it is *acked* by ``ack_until`` or by the harness once the
turn it woke ended cleanly. A new harness incarnation (``attach``) makes
every delivered-but-unacked row of the agent undelivered again. Acked rows
never come back. Every query is scoped to the calling agent's own rows.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

from hyperhive.core.db import Database
from hyperhive.core.notify import Notifier
from hyperhive.errors import LimitExceeded, NotFound
from hyperhive.names import GRACEFUL_STOP
from hyperhive.protocol import Message, WaitResult

__all__ = ["RECV_CAP", "WAKE_BATCH", "Broker", "graceful_stop_message"]

RECV_CAP = 5
WAKE_BATCH = 20


def graceful_stop_message(agent: str) -> Message:
    return Message.model_validate(
        {
            "id": 0,
            "from": GRACEFUL_STOP,
            "to": agent,
            "created_at": time.time(),
            "body": (
                "The hive is stopping you gracefully. Flush anything durable to your "
                "state notes now and end this turn; new mail waits for your next start."
            ),
        }
    )


def _row_message(row: sqlite3.Row) -> Message:
    return Message.model_validate(
        {
            "id": row["id"],
            "from": row["sender"],
            "to": row["recipient"],
            "body": row["body"],
            "in_reply_to": row["in_reply_to"],
            "created_at": row["created_at"],
            "acked": row["acked_at"] is not None,
        }
    )


def ensure_agent_row(conn: sqlite3.Connection, agent: str) -> sqlite3.Row:
    conn.execute("INSERT OR IGNORE INTO agent_state(name) VALUES (?)", (agent,))
    row: sqlite3.Row = conn.execute("SELECT * FROM agent_state WHERE name = ?", (agent,)).fetchone()
    return row


def insert_message(
    conn: sqlite3.Connection, sender: str, recipient: str, body: str, in_reply_to: int | None
) -> int:
    if in_reply_to is not None and in_reply_to > 0:
        if conn.execute("SELECT 1 FROM messages WHERE id = ?", (in_reply_to,)).fetchone() is None:
            raise NotFound(f"in_reply_to #{in_reply_to}: no such message")
    cur = conn.execute(
        "INSERT INTO messages(sender, recipient, body, in_reply_to, created_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (sender, recipient, body, in_reply_to or None, time.time()),
    )
    assert cur.lastrowid is not None
    return cur.lastrowid


def _take_undelivered(conn: sqlite3.Connection, agent: str, limit: int) -> list[Message]:
    rows = conn.execute(
        "SELECT * FROM messages WHERE recipient = ? AND acked_at IS NULL "
        "AND delivered_at IS NULL ORDER BY id LIMIT ?",
        (agent, limit),
    ).fetchall()
    if rows:
        now = time.time()
        conn.executemany(
            "UPDATE messages SET delivered_at = ? WHERE id = ?", [(now, r["id"]) for r in rows]
        )
    return [_row_message(r) for r in rows]


class Broker:
    """Message operations on ``hive.db``, waking ``wait`` on every change."""

    def __init__(self, db: Database, notifier: Notifier, max_body: int) -> None:
        self.db = db
        self.notifier = notifier
        self.max_body = max_body

    def check_body(self, body: str) -> None:
        size = len(body.encode("utf-8"))
        if size > self.max_body:
            raise LimitExceeded(
                f"message body is {size} bytes; the limit is {self.max_body} bytes. "
                "Put large content in a file and send its path"
            )

    async def send(
        self, sender: str, recipient: str, body: str, in_reply_to: int | None = None
    ) -> int:
        """Store a message (routing already decided by the caller); return its id."""
        self.check_body(body)
        msg_id = await self.db.run(
            lambda c: insert_message(c, sender, recipient, body, in_reply_to)
        )
        self.notifier.notify(recipient)
        return msg_id

    async def recv(self, agent: str, max_rows: int = 1) -> list[Message]:
        """Never blocks: the oldest undelivered rows, at most ``RECV_CAP``."""
        limit = max(1, min(max_rows, RECV_CAP))

        def op(conn: sqlite3.Connection) -> list[Message]:
            if ensure_agent_row(conn, agent)["fenced"]:
                return [graceful_stop_message(agent)]
            return _take_undelivered(conn, agent, limit)

        return await self.db.run(op)

    async def ack_until(self, agent: str, up_to: int) -> int:
        """Stamp every row of ``agent``'s with id ≤ ``up_to`` as acked (one UPDATE)."""
        return await self.db.run(
            lambda c: (
                c.execute(
                    "UPDATE messages SET acked_at = ? WHERE recipient = ? AND id <= ? "
                    "AND acked_at IS NULL",
                    (time.time(), agent, up_to),
                ).rowcount
            )
        )

    async def ack_ids(self, agent: str, ids: Sequence[int]) -> int:
        """Ack exactly these rows of ``agent``'s (the messages a clean turn handled)."""
        if not ids:
            return 0
        now = time.time()

        def op(conn: sqlite3.Connection) -> int:
            return sum(
                conn.execute(
                    "UPDATE messages SET acked_at = ? WHERE recipient = ? AND id = ? "
                    "AND acked_at IS NULL",
                    (now, agent, i),
                ).rowcount
                for i in ids
            )

        return await self.db.run(op)

    async def attach(self, agent: str) -> int:
        """Start a new incarnation: unfence, redeliver unacked rows; return its number."""

        def op(conn: sqlite3.Connection) -> int:
            ensure_agent_row(conn, agent)
            conn.execute(
                "UPDATE messages SET delivered_at = NULL WHERE recipient = ? "
                "AND acked_at IS NULL AND delivered_at IS NOT NULL",
                (agent,),
            )
            conn.execute(
                "UPDATE agent_state SET incarnation = incarnation + 1, fenced = 0 WHERE name = ?",
                (agent,),
            )
            row = conn.execute(
                "SELECT incarnation FROM agent_state WHERE name = ?", (agent,)
            ).fetchone()
            return int(row[0])

        incarnation = await self.db.run(op)
        self.notifier.notify(agent)
        return incarnation

    async def fence(self, agent: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            ensure_agent_row(conn, agent)
            conn.execute("UPDATE agent_state SET fenced = 1 WHERE name = ?", (agent,))

        await self.db.run(op)
        self.notifier.notify(agent)

    async def _poll(self, agent: str, todo_version: int) -> WaitResult | None:
        def op(conn: sqlite3.Connection) -> WaitResult | None:
            state = ensure_agent_row(conn, agent)
            if state["fenced"]:
                return WaitResult(stop=True, todo_version=state["todo_version"])
            messages = _take_undelivered(conn, agent, WAKE_BATCH)
            changed = state["todo_version"] > todo_version
            compact = bool(state["compact_pending"])
            if not messages and not changed and not compact:
                return None
            return WaitResult(
                messages=messages,
                todo_version=state["todo_version"],
                todos_changed=changed,
                compact=compact,
            )

        return await self.db.run(op)

    async def wait(self, agent: str, seconds: float, todo_version: int) -> WaitResult:
        """Return as soon as there is mail, a todo change, a compact or a stop."""
        deadline = time.monotonic() + seconds
        while True:
            event = self.notifier.event(agent)  # taken before the poll: no lost wake-up
            result = await self._poll(agent, todo_version)
            if result is not None:
                return result
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not await self.notifier.wait(event, remaining):
                return WaitResult(todo_version=todo_version)

    async def inbox(
        self, recipient: str, limit: int = 50, unread_only: bool = False
    ) -> list[Message]:
        """The newest ``limit`` rows addressed to ``recipient`` (oldest first)."""
        where = "recipient = ?" + (" AND acked_at IS NULL" if unread_only else "")
        rows = await self.db.run(
            lambda c: c.execute(
                f"SELECT * FROM messages WHERE {where} ORDER BY id DESC LIMIT ?",
                (recipient, limit),
            ).fetchall()
        )
        return [_row_message(r) for r in reversed(rows)]

    async def outbox(self, sender: str, limit: int = 50) -> list[Message]:
        rows = await self.db.run(
            lambda c: c.execute(
                "SELECT * FROM messages WHERE sender = ? ORDER BY id DESC LIMIT ?",
                (sender, limit),
            ).fetchall()
        )
        return [_row_message(r) for r in reversed(rows)]
