"""The durable mailbox on PostgreSQL (semantics: ``base.MessageRepo``).

Sends are group-committed (``sendbatch``), each with its ``pg_notify`` in
the same transaction. Handing rows out (``recv``/``poll``) claims
them with ``FOR UPDATE SKIP LOCKED``, so two concurrent takers never get the
same row, and commits with ``synchronous_commit = off``: losing a delivered
mark only means a redelivery, so it does not wait for its own WAL flush.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hyperhive.errors import NotFound
from hyperhive.store.base import ChangeFeed, FeedCursor, MessageRepo
from hyperhive.store.postgres._repo import (
    MSG_COLS,
    Conn,
    PgRepo,
    ensure_agent,
    message_row,
    now,
)
from hyperhive.store.postgres.database import PgDatabase
from hyperhive.store.postgres.listener import CHANNEL
from hyperhive.store.postgres.sendbatch import INSERT, SendBatcher
from hyperhive.store.rows import MessageCounts, MessageRow, Poll, Recv

__all__ = ["PgMessages", "insert_message"]

_TAKE = f"""
UPDATE messages SET delivered_at = %(at)s
WHERE id IN (
    SELECT id FROM messages
    WHERE recipient = %(agent)s AND acked_at IS NULL AND delivered_at IS NULL
    ORDER BY id LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
RETURNING {MSG_COLS}
"""


async def insert_message(
    conn: Conn, sender: str, recipient: str, body: str, in_reply_to: int | None
) -> int:
    """Insert one message in the caller's transaction (the caller NOTIFYs); ``NotFound``
    for a reply to a message that does not exist."""
    reply = in_reply_to if in_reply_to is not None and in_reply_to > 0 else None
    params = {"sender": sender, "recipient": recipient, "body": body, "reply": reply, "at": now()}
    row = await (await conn.execute(INSERT, params)).fetchone()
    if row is None:
        raise NotFound(f"in_reply_to #{reply}: no such message")
    return int(row[0])


async def _take(conn: Conn, agent: str, limit: int) -> tuple[MessageRow, ...]:
    cur = await conn.execute(_TAKE, {"at": now(), "agent": agent, "limit": max(0, limit)})
    return tuple(sorted((message_row(r) for r in await cur.fetchall()), key=lambda m: m.id))


async def _state(conn: Conn, agent: str) -> tuple[bool, int, bool]:
    """(fenced, todo_version, compact_pending), creating the row when absent."""
    sql = "SELECT fenced, todo_version, compact_pending FROM agent_state WHERE name = %s"
    row = await (await conn.execute(sql, (agent,))).fetchone()
    if row is None:
        await ensure_agent(conn, agent)
        row = await (await conn.execute(sql, (agent,))).fetchone()
    assert row is not None
    return bool(row[0]), int(row[1]), bool(row[2])


class PgMessages(PgRepo, MessageRepo):
    def __init__(self, db: PgDatabase, feed: ChangeFeed) -> None:
        super().__init__(db, feed)
        self.batcher = SendBatcher(db, CHANNEL, feed.publish)

    async def send(
        self, sender: str, recipient: str, body: str, in_reply_to: int | None = None
    ) -> int:
        reply = in_reply_to if in_reply_to is not None and in_reply_to > 0 else None
        return await self.batcher.send(sender, recipient, body, reply)

    async def send_keyed(
        self, sender: str, recipient: str, body: str, key: str
    ) -> tuple[int, bool]:
        async def op(conn: Conn, woken: set[str]) -> tuple[int, bool]:
            # The key row first: a concurrent repeat waits on it, then finds it.
            cur = await conn.execute(
                "INSERT INTO delivery_keys(recipient, sender, key, message_id) "
                "VALUES (%s, %s, %s, 0) ON CONFLICT DO NOTHING",
                (recipient, sender, key),
            )
            if cur.rowcount == 0:
                seen = await (
                    await conn.execute(
                        "SELECT message_id FROM delivery_keys WHERE recipient = %s "
                        "AND sender = %s AND key = %s",
                        (recipient, sender, key),
                    )
                ).fetchone()
                assert seen is not None
                return int(seen[0]), False
            msg_id = await insert_message(conn, sender, recipient, body, None)
            await conn.execute(
                "UPDATE delivery_keys SET message_id = %s WHERE recipient = %s AND sender = %s "
                "AND key = %s",
                (msg_id, recipient, sender, key),
            )
            woken.add(recipient)
            return msg_id, True

        return await self._tx_waking(op)

    async def get(self, message_id: int) -> MessageRow | None:
        rows = await self._read(f"SELECT {MSG_COLS} FROM messages WHERE id = %s", (message_id,))
        return message_row(rows[0]) if rows else None

    async def recv(self, agent: str, limit: int) -> Recv:
        async def op(conn: Conn) -> Recv:
            await conn.execute("SET LOCAL synchronous_commit = off")
            fenced, _, _ = await _state(conn, agent)
            if fenced:
                return Recv(fenced=True)
            return Recv(fenced=False, messages=await _take(conn, agent, limit))

        return await self._tx(op)

    async def poll(self, agent: str, todo_version: int, limit: int) -> Poll | None:
        async def op(conn: Conn) -> Poll | None:
            await conn.execute("SET LOCAL synchronous_commit = off")
            fenced, version, compact = await _state(conn, agent)
            if fenced:
                return Poll(stop=True, todo_version=version)
            messages = await _take(conn, agent, limit)
            cur = await conn.execute(
                "SELECT EXISTS (SELECT 1 FROM todos WHERE agent = %s AND version > %s)",
                (agent, todo_version),
            )
            row = await cur.fetchone()
            return Poll.found(version, messages, bool(row and row[0]), compact)

        return await self._tx(op)

    async def ack_until(self, agent: str, up_to: int) -> int:
        async def op(conn: Conn) -> int:
            cur = await conn.execute(
                "UPDATE messages SET acked_at = %s WHERE recipient = %s AND id <= %s "
                "AND acked_at IS NULL",
                (now(), agent, up_to),
            )
            return cur.rowcount

        return await self._db.one(op)

    async def ack_ids(self, agent: str, ids: Sequence[int]) -> int:
        if not ids:
            return 0

        async def op(conn: Conn) -> int:
            return await ack_ids(conn, agent, ids)

        return await self._db.one(op)

    async def attach(self, agent: str) -> int:
        async def op(conn: Conn, woken: set[str]) -> int:
            await ensure_agent(conn, agent)
            await conn.execute(
                "UPDATE messages SET delivered_at = NULL WHERE recipient = %s "
                "AND acked_at IS NULL AND delivered_at IS NOT NULL",
                (agent,),
            )
            cur = await conn.execute(
                "UPDATE agent_state SET incarnation = incarnation + 1, fenced = FALSE "
                "WHERE name = %s RETURNING incarnation",
                (agent,),
            )
            row = await cur.fetchone()
            assert row is not None
            woken.add(agent)
            return int(row[0])

        return await self._tx_waking(op)

    async def fence(self, agent: str) -> None:
        async def op(conn: Conn, woken: set[str]) -> None:
            await conn.execute(
                "INSERT INTO agent_state(name, fenced) VALUES (%s, TRUE) "
                "ON CONFLICT (name) DO UPDATE SET fenced = TRUE",
                (agent,),
            )
            woken.add(agent)

        await self._tx_waking(op)

    async def inbox(
        self, recipient: str, limit: int = 50, unread_only: bool = False
    ) -> list[MessageRow]:
        # Unread: few rows, found through messages_pending; else along messages_recipient_at.
        unread, order = (
            (" AND acked_at IS NULL", "id") if unread_only else ("", "created_at DESC, id")
        )
        rows = await self._read(
            f"SELECT {MSG_COLS} FROM messages WHERE recipient = %s{unread} "
            f"ORDER BY {order} DESC LIMIT %s",
            (recipient, max(0, limit)),
        )
        return [message_row(r) for r in reversed(rows)]

    async def outbox(self, sender: str, limit: int = 50) -> list[MessageRow]:
        rows = await self._read(
            f"SELECT {MSG_COLS} FROM messages WHERE sender = %s "
            "ORDER BY created_at DESC, id DESC LIMIT %s",
            (sender, max(0, limit)),
        )
        return [message_row(r) for r in reversed(rows)]

    async def thread(self, message_id: int) -> list[MessageRow]:
        # Up to the root through in_reply_to, then every reply below it. A reply always
        # names an older row, so neither walk can loop.
        rows = await self._read(
            f"""
WITH RECURSIVE up AS (
    SELECT id, in_reply_to, 0 AS depth FROM messages WHERE id = %s
    UNION ALL
    SELECT m.id, m.in_reply_to, up.depth + 1 FROM messages m JOIN up ON m.id = up.in_reply_to
), down AS (
    SELECT id FROM (SELECT id FROM up ORDER BY depth DESC LIMIT 1) AS root
    UNION
    SELECT m.id FROM messages m JOIN down ON m.in_reply_to = down.id
)
SELECT {MSG_COLS} FROM messages WHERE id IN (SELECT id FROM down) ORDER BY id
""",
            (message_id,),
        )
        return [message_row(r) for r in rows]

    async def unread_counts(self, recipient: str) -> dict[str, int]:
        rows = await self._read(
            "SELECT sender, count(*) FROM messages WHERE recipient = %s AND acked_at IS NULL "
            "GROUP BY sender",
            (recipient,),
        )
        return {str(sender): int(n) for sender, n in rows}

    async def scan(self, after_id: int = 0, limit: int = 1000) -> list[MessageRow]:
        rows = await self._read(
            f"SELECT {MSG_COLS} FROM messages WHERE id > %s ORDER BY id LIMIT %s",
            (after_id, max(0, limit)),
        )
        return [message_row(r) for r in rows]

    async def page(
        self, before: FeedCursor | None = None, limit: int = 50, agent: str | None = None
    ) -> list[MessageRow]:
        at, below = before or (float("inf"), 2**63 - 1)
        # Strictly before (at, id): ``created_at <=`` bounds the index range, the rest filters.
        older = "created_at <= %(t)s AND (created_at < %(t)s OR id < %(b)s)"
        order = "ORDER BY created_at DESC, id DESC LIMIT %(n)s"
        params = {"a": agent, "t": at, "b": below, "n": max(0, limit)}
        if agent is None:
            rows = await self._read(
                f"SELECT {MSG_COLS} FROM messages WHERE {older} {order}", params
            )
        else:
            rows = await self._read(
                f"(SELECT {MSG_COLS} FROM messages WHERE sender = %(a)s AND {older} {order}) "
                f"UNION (SELECT {MSG_COLS} FROM messages WHERE recipient = %(a)s AND {older} "
                f"{order}) {order}",
                params,
            )
        return [message_row(r) for r in rows]

    async def counts(self) -> list[MessageCounts]:
        rows = await self._read(
            "SELECT agent, sum(sent), sum(delivered), sum(queued) FROM ("
            "SELECT sender AS agent, count(*) AS sent, 0 AS delivered, 0 AS queued "
            "FROM messages GROUP BY sender UNION ALL "
            "SELECT recipient, 0, count(delivered_at), count(*) FILTER (WHERE acked_at IS NULL) "
            "FROM messages GROUP BY recipient"
            ") AS t GROUP BY agent ORDER BY agent",
            (),
        )
        return [MessageCounts(str(a), int(s), int(d), int(q)) for a, s, d, q in rows]


async def ack_ids(conn: Conn, agent: str, ids: Sequence[int]) -> int:
    """Ack exactly these rows of ``agent``'s, in the caller's transaction."""
    if not ids:
        return 0
    params: tuple[Any, ...] = (now(), agent, list(ids))
    cur = await conn.execute(
        "UPDATE messages SET acked_at = %s WHERE recipient = %s AND id = ANY(%s) "
        "AND acked_at IS NULL",
        params,
    )
    return cur.rowcount
