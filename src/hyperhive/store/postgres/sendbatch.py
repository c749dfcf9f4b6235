"""Group commit for sends on PostgreSQL.

A commit costs a WAL flush, and a transaction that NOTIFYs takes a
database-wide lock through its commit, so one transaction per send caps the
hive at the disk's flush rate. Sends that arrive while a commit is under way
queue up and go together in the next transaction: BEGIN, each INSERT with
its NOTIFY, COMMIT, pipelined in one round trip. Every caller's
await still returns only after that commit. A lone send is one statement,
INSERT and NOTIFY together, in its own implicit transaction.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from psycopg import AsyncCursor

from hyperhive.errors import HiveError, NotFound, Unavailable
from hyperhive.store.postgres._repo import Conn, now
from hyperhive.store.postgres.database import PgDatabase

__all__ = ["MAX_BATCH", "SendBatcher"]

log = logging.getLogger(__name__)

# Bound a batch so one commit never holds a huge transaction open.
MAX_BATCH = 256
# Transactions of sends in flight at once: while one waits for its WAL flush, the
# next gathers and writes, and the server flushes them together.
WRITERS = 2

INSERT = """
INSERT INTO messages(sender, recipient, body, in_reply_to, created_at)
SELECT %(sender)s, %(recipient)s, %(body)s, %(reply)s, %(at)s
WHERE %(reply)s::bigint IS NULL OR EXISTS (SELECT 1 FROM messages WHERE id = %(reply)s)
RETURNING id
"""
# The same, with its NOTIFY: one statement is one transaction and one round trip.
SEND_ONE = f"""
WITH ins AS ({INSERT.strip()})
SELECT id, pg_notify(%(channel)s, %(origin)s || ':' || %(recipient)s) FROM ins
"""


@dataclass
class _Send:
    params: dict[str, Any]
    future: asyncio.Future[int] = field(repr=False)

    @property
    def recipient(self) -> str:
        return str(self.params["recipient"])


def _missing(reply: object) -> NotFound:
    return NotFound(f"in_reply_to #{reply}: no such message")


class SendBatcher:
    """Queues concurrent sends and commits them together (one writer at a time)."""

    def __init__(
        self, db: PgDatabase, channel: str, publish: Callable[[Iterable[str]], None]
    ) -> None:
        self._db = db
        self._channel = channel
        self._publish = publish
        self._queue: list[_Send] = []
        self._drainers: set[asyncio.Task[None]] = set()

    async def send(self, sender: str, recipient: str, body: str, reply: int | None) -> int:
        params = {"sender": sender, "recipient": recipient, "body": body, "reply": reply}
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._queue.append(_Send(params, future))
        if len(self._drainers) < WRITERS:
            task = asyncio.create_task(self._drain(), name="pg-send-batcher")
            self._drainers.add(task)
            task.add_done_callback(self._drainers.discard)
        # A caller that gives up does not undo its send: it may still commit.
        return await asyncio.shield(future)

    async def close(self) -> None:
        if self._drainers:
            await asyncio.wait(set(self._drainers), timeout=30)

    async def _drain(self) -> None:
        while self._queue:
            batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
            await self._commit(batch)

    async def _commit(self, batch: list[_Send]) -> None:
        at = now()
        for item in batch:
            item.params["at"] = at
        try:
            if len(batch) == 1 and self._db.fence_epoch is None:
                ids = [await self._db.read(lambda c: self._one(c, batch[0]))]
            else:
                ids = await self._db.read(lambda c: self._many(c, batch))
        except HiveError as exc:
            _fail(batch, exc)
            return
        except BaseException:
            _fail(batch, Unavailable("the store closed before this send was committed"))
            raise
        self._publish(
            sorted({s.recipient for s, i in zip(batch, ids, strict=True) if i is not None})
        )
        for item, msg_id in zip(batch, ids, strict=True):
            if item.future.done():
                continue
            if msg_id is None:
                item.future.set_exception(_missing(item.params["reply"]))
            else:
                item.future.set_result(msg_id)

    async def _one(self, conn: Conn, item: _Send) -> int | None:
        params = {**item.params, "channel": self._channel, "origin": self._db.origin}
        row = await (await conn.execute(SEND_ONE, params)).fetchone()
        return None if row is None else int(row[0])

    async def _many(self, conn: Conn, batch: list[_Send]) -> list[int | None]:
        # BEGIN, every INSERT with its NOTIFY, COMMIT: queued in one pipeline, so the
        # whole batch costs one round trip and one commit.
        extra = {"channel": self._channel, "origin": self._db.origin}
        cursors: list[AsyncCursor[Any]] = []
        async with conn.pipeline(), conn.transaction():
            if self._db.fence_epoch is not None:
                await conn.execute("SELECT hyperhive_fence(%s)", (self._db.fence_epoch,))
            for item in batch:
                cur = conn.cursor()
                await cur.execute(SEND_ONE, {**item.params, **extra})
                cursors.append(cur)
        ids: list[int | None] = []
        for cur in cursors:
            row = await cur.fetchone()
            ids.append(None if row is None else int(row[0]))
        return ids


def _fail(batch: list[_Send], exc: BaseException) -> None:
    for item in batch:
        if not item.future.done():
            item.future.set_exception(exc)
