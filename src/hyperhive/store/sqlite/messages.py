"""The mailbox on SQLite: send, recv/poll (lazy delivered marks), ack, attach, fence."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from hyperhive.store.base import FeedCursor, MessageRepo, ParkedPoll
from hyperhive.store.rows import MessageCounts, MessageRow, Poll, Recv
from hyperhive.store.sqlite.common import ensure_agent, insert_message
from hyperhive.store.sqlite.engine import Engine, Tx
from hyperhive.store.sqlite.rowmap import message_row

__all__ = ["SqliteMessages"]


def _todos_newer(tx: Tx, agent: str, seen: int) -> bool:
    """An open todo upserted after the version the waiter saw: a net change for it."""
    row = tx.one("SELECT 1 FROM todos WHERE agent = ? AND version > ? LIMIT 1", (agent, seen))
    return row is not None


# One statement takes the rows and marks them (RETURNING's order is not the id's).
_TAKE = (
    "UPDATE messages SET delivered_at = ? WHERE id IN ("
    "SELECT id FROM messages WHERE recipient = ? AND acked_at IS NULL "
    "AND delivered_at IS NULL ORDER BY id LIMIT ?) RETURNING *"
)


def _take_undelivered(tx: Tx, agent: str, limit: int) -> tuple[MessageRow, ...]:
    rows = tx.all(_TAKE, (time.time(), agent, limit))
    if not rows:
        return ()
    return tuple(sorted((message_row(r) for r in rows), key=_by_id))


# Newest first along messages_sender_at / messages_recipient_at (the id's order too).
_BY_TIME = "created_at DESC, id"


def _by_id(m: MessageRow) -> int:
    return m.id


def _state(tx: Tx, agent: str) -> tuple[bool, int, bool]:
    """(fenced, todo_version, compact_pending): a poll's three columns, no full row and no
    write (the row is created only when absent)."""
    row = tx.one(
        "SELECT fenced, todo_version, compact_pending FROM agent_state WHERE name = ?", (agent,)
    )
    if row is None:
        state = ensure_agent(tx, agent)
        return state.fenced, state.todo_version, state.compact_pending
    return bool(row[0]), int(row[1]), bool(row[2])


def _poll_op(agent: str, todo_version: int, limit: int) -> Callable[[Tx], Poll | None]:
    def op(tx: Tx) -> Poll | None:
        fenced, version, compact = _state(tx, agent)
        if fenced:
            return Poll(stop=True, todo_version=version)
        messages = _take_undelivered(tx, agent, max(1, limit))
        return Poll.found(version, messages, _todos_newer(tx, agent, todo_version), compact)

    return op


class SqliteMessages(MessageRepo):
    def __init__(self, engine: Engine) -> None:
        self._db = engine

    async def send(
        self, sender: str, recipient: str, body: str, in_reply_to: int | None = None
    ) -> int:
        return await self._db.run(
            lambda tx: insert_message(tx, sender, recipient, body, in_reply_to)
        )

    async def send_keyed(
        self, sender: str, recipient: str, body: str, key: str
    ) -> tuple[int, bool]:
        def op(tx: Tx) -> tuple[int, bool]:
            seen = tx.one(
                "SELECT message_id FROM delivery_keys WHERE recipient = ? AND sender = ? "
                "AND key = ?",
                (recipient, sender, key),
            )
            if seen is not None:
                return int(seen["message_id"]), False
            msg_id = insert_message(tx, sender, recipient, body, None)
            tx.conn.execute(
                "INSERT INTO delivery_keys(recipient, sender, key, message_id) VALUES (?, ?, ?, ?)",
                (recipient, sender, key, msg_id),
            )
            return msg_id, True

        return await self._db.run(op)

    async def get(self, message_id: int) -> MessageRow | None:
        def op(tx: Tx) -> MessageRow | None:
            row = tx.one("SELECT * FROM messages WHERE id = ?", (message_id,))
            return None if row is None else message_row(row)

        return await self._db.run(op, durable=False)

    async def recv(self, agent: str, limit: int) -> Recv:
        def op(tx: Tx) -> Recv:
            if _state(tx, agent)[0]:
                return Recv(fenced=True)
            return Recv(fenced=False, messages=_take_undelivered(tx, agent, max(1, limit)))

        return await self._db.run(op, durable=False)

    async def poll(self, agent: str, todo_version: int, limit: int) -> Poll | None:
        return await self._db.run(_poll_op(agent, todo_version, limit), durable=False)

    async def poll_or_park(self, agent: str, todo_version: int, limit: int) -> Poll | ParkedPoll:
        # Parked on the database thread: the commit that wakes ``agent`` answers it.
        return await self._db.run_or_park(agent, _poll_op(agent, todo_version, limit))

    async def ack_until(self, agent: str, up_to: int) -> int:
        return await self._db.run(
            lambda tx: (
                tx.execute(
                    "UPDATE messages SET acked_at = ? WHERE recipient = ? AND id <= ? "
                    "AND acked_at IS NULL",
                    (time.time(), agent, up_to),
                ).rowcount
            )
        )

    async def ack_ids(self, agent: str, ids: Sequence[int]) -> int:
        if not ids:
            return 0
        return await self._db.run(lambda tx: ack_ids(tx, agent, ids))

    async def attach(self, agent: str) -> int:
        def op(tx: Tx) -> int:
            ensure_agent(tx, agent)
            tx.execute(
                "UPDATE messages SET delivered_at = NULL WHERE recipient = ? "
                "AND acked_at IS NULL AND delivered_at IS NOT NULL",
                (agent,),
            )
            row = tx.one(
                "UPDATE agent_state SET incarnation = incarnation + 1, fenced = 0 "
                "WHERE name = ? RETURNING incarnation",
                (agent,),
            )
            assert row is not None
            tx.wake(agent)
            return int(row[0])

        return await self._db.run(op)

    async def fence(self, agent: str) -> None:
        def op(tx: Tx) -> None:
            ensure_agent(tx, agent)
            tx.execute("UPDATE agent_state SET fenced = 1 WHERE name = ?", (agent,))
            tx.wake(agent)

        await self._db.run(op)

    async def inbox(
        self, recipient: str, limit: int = 50, unread_only: bool = False
    ) -> list[MessageRow]:
        if unread_only:  # few rows, found through messages_pending
            return await self._newest("recipient = ? AND acked_at IS NULL", "id", recipient, limit)
        return await self._newest("recipient = ?", _BY_TIME, recipient, limit)

    async def outbox(self, sender: str, limit: int = 50) -> list[MessageRow]:
        return await self._newest("sender = ?", _BY_TIME, sender, limit)

    async def _newest(self, where: str, order: str, who: str, limit: int) -> list[MessageRow]:
        sql = f"SELECT * FROM messages WHERE {where} ORDER BY {order} DESC LIMIT ?"
        rows = await self._db.run(lambda tx: tx.all(sql, (who, limit)), durable=False)
        return [message_row(r) for r in reversed(rows)]

    async def thread(self, message_id: int) -> list[MessageRow]:
        # Up to the root, then the whole tree down from it.
        sql = (
            "WITH RECURSIVE up(id, parent) AS ("
            " SELECT id, in_reply_to FROM messages WHERE id = ?"
            " UNION SELECT m.id, m.in_reply_to FROM messages m JOIN up ON m.id = up.parent"
            "), root AS (SELECT id FROM up WHERE parent IS NULL), "
            "down(id) AS (SELECT id FROM root"
            " UNION SELECT m.id FROM messages m JOIN down ON m.in_reply_to = down.id) "
            "SELECT * FROM messages WHERE id IN (SELECT id FROM down) ORDER BY id"
        )
        rows = await self._db.run(lambda tx: tx.all(sql, (message_id,)), durable=False)
        return [message_row(r) for r in rows]

    async def unread_counts(self, recipient: str) -> dict[str, int]:
        rows = await self._db.run(
            lambda tx: tx.all(
                "SELECT sender, COUNT(*) FROM messages "
                "WHERE recipient = ? AND acked_at IS NULL GROUP BY sender",
                (recipient,),
            ),
            durable=False,
        )
        return {str(r[0]): int(r[1]) for r in rows}

    async def scan(self, after_id: int = 0, limit: int = 1000) -> list[MessageRow]:
        rows = await self._db.run(
            lambda tx: tx.all(
                "SELECT * FROM messages WHERE id > ? ORDER BY id LIMIT ?", (after_id, limit)
            ),
            durable=False,
        )
        return [message_row(r) for r in rows]

    async def page(
        self, before: FeedCursor | None = None, limit: int = 50, agent: str | None = None
    ) -> list[MessageRow]:
        at, below = before or (float("inf"), 2**63 - 1)
        # Strictly before (at, id): ``created_at <=`` bounds the index range, the rest filters.
        older = "created_at <= ?2 AND (created_at < ?2 OR id < ?3)"
        params: tuple[object, ...]
        if agent is None:
            sql = f"SELECT * FROM messages WHERE {older} ORDER BY created_at DESC, id DESC LIMIT ?1"
            params = (max(0, limit), at, below)
        else:
            # A UNION of two index walks (messages_sender_at, messages_recipient_at),
            # each stopping at ``limit``: fast at any depth of a big table.
            sql = (
                f"SELECT * FROM (SELECT * FROM messages WHERE sender = ?4 AND {older} "
                "ORDER BY created_at DESC, id DESC LIMIT ?1) UNION "
                f"SELECT * FROM (SELECT * FROM messages WHERE recipient = ?4 AND {older} "
                "ORDER BY created_at DESC, id DESC LIMIT ?1) "
                "ORDER BY created_at DESC, id DESC LIMIT ?1"
            )
            params = (max(0, limit), at, below, agent)
        rows = await self._db.run(lambda tx: tx.all(sql, params), durable=False)
        return [message_row(r) for r in rows]

    async def counts(self) -> list[MessageCounts]:
        rows = await self._db.run(lambda tx: tx.all(COUNTS_SQL), durable=False)
        return [MessageCounts(str(a), int(s), int(d), int(q)) for a, s, d, q in rows]


# Both halves are index-only scans (messages_sender_at, messages_pending).
COUNTS_SQL = (
    "SELECT agent, SUM(sent), SUM(delivered), SUM(queued) FROM ("
    "SELECT sender AS agent, COUNT(*) AS sent, 0 AS delivered, 0 AS queued "
    "FROM messages GROUP BY sender UNION ALL "
    "SELECT recipient, 0, COUNT(delivered_at), SUM(acked_at IS NULL) "
    "FROM messages GROUP BY recipient"
    ") GROUP BY agent ORDER BY agent"
)


def ack_ids(tx: Tx, agent: str, ids: Sequence[int]) -> int:
    now = time.time()
    return sum(
        tx.execute(
            "UPDATE messages SET acked_at = ? WHERE recipient = ? AND id = ? AND acked_at IS NULL",
            (now, agent, i),
        ).rowcount
        for i in ids
    )
