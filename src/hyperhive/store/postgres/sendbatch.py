"""Group commit for sends on PostgreSQL.

A commit costs a WAL flush, and a transaction that NOTIFYs holds a
database-wide lock through its commit, so one transaction per send caps the
hive at the disk's flush rate. Sends that arrive while a commit is under way
queue up and go together in the next transaction, which is *one statement*
(:func:`batch_sql`, in autocommit: one round trip, one implicit transaction):
the rows as one JSON array, unnested and inserted at once, one NOTIFY per distinct
recipient, and, when a lease fences this store, ``hyperhive_fence(epoch)``.
Every caller's await returns only after that commit.

Each caller gets its own answer. A reply to a missing message is filtered out
of the batch by the statement itself (that caller alone gets ``NotFound``);
text PostgreSQL cannot store is refused before it joins a batch; and if the
server refuses a batch's statement anyway, nothing of it was written, so each
send is retried alone and only the bad one fails. A lost connection or a
fenced write fails the whole batch with ``Unavailable``: nobody was told ok.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Iterable
from time import perf_counter_ns
from typing import NamedTuple

from hyperhive.errors import HiveError, InvalidRequest, NotFound, StorageError, Unavailable
from hyperhive.store.postgres._repo import Conn, now
from hyperhive.store.postgres.database import PgDatabase

__all__ = ["INSERT", "MAX_BATCH", "SendBatcher", "batch_sql", "check_text"]

log = logging.getLogger(__name__)

# Bound a batch so one commit never holds a huge transaction open.
MAX_BATCH = 256
# Transactions of sends in flight at once: while one waits for its WAL flush, the
# next gathers and executes, and commits as soon as the first releases the NOTIFY lock.
WRITERS = 2
# The largest BIGINT: a reply to anything above it names no message.
MAX_ID = 2**63 - 1
_SAFE = re.compile(r"\w+")
# Compact, and UTF-8 as is (``check_text`` has refused what UTF-8 cannot carry).
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

# One message in the caller's transaction (``messages.insert_message``).
INSERT = """
INSERT INTO messages(sender, recipient, body, in_reply_to, created_at)
SELECT %(sender)s, %(recipient)s, %(body)s, %(reply)s, %(at)s
WHERE %(reply)s::bigint IS NULL OR EXISTS (SELECT 1 FROM messages WHERE id = %(reply)s)
RETURNING id
"""


def batch_sql(channel: str, origin: str, *, fenced: bool) -> str:
    """The batch statement. Its parameters: the rows as one JSON text
    (``[[sender, recipient, body, reply], ...]``), the time, and the fence's epoch."""
    # Ids are drawn in the callers' order (``ord``) and inserted explicitly, so the
    # result maps each caller to its row; ``ok`` is materialized (referenced thrice,
    # volatile), so each row draws one id. A reply to a missing row is filtered out
    # by a scalar subquery, one primary-key probe per reply: written as EXISTS, the
    # planner hashed every id in ``messages`` (a sequential scan of the whole table
    # for each batch holding a reply) whenever the table was small enough to hash.
    # The rows travel as one JSON text because psycopg dumps a ``str`` in C, where
    # four list parameters went through its Python array dumper (most of a batch's
    # client CPU); channel and origin are fixed for the store, so they are literals.
    for value in (channel, origin):
        if not _SAFE.fullmatch(value):
            raise ValueError(f"not a plain word: {value!r}")
    fence = ", fence AS (SELECT hyperhive_fence(%s))" if fenced else ""
    return f"""
WITH ok AS (
    SELECT nextval('messages_id_seq') AS id, s.* FROM (
        SELECT t.* FROM (
            SELECT e.ord, e.v->>0 AS sender, e.v->>1 AS recipient, e.v->>2 AS body,
                (e.v->>3)::bigint AS reply
            FROM json_array_elements(%s::json) WITH ORDINALITY AS e(v, ord)
        ) AS t
        WHERE t.reply IS NULL OR (SELECT true FROM messages m WHERE m.id = t.reply)
        ORDER BY t.ord
    ) AS s
), ins AS (
    INSERT INTO messages(id, sender, recipient, body, in_reply_to, created_at)
    SELECT id, sender, recipient, body, reply, %s FROM ok
), woken AS (
    SELECT count(pg_notify('{channel}', '{origin}:' || r.recipient)) AS n
    FROM (SELECT DISTINCT recipient FROM ok) AS r
){fence}
SELECT ok.ord, ok.id FROM ok, woken{", fence" if fenced else ""}
"""


class _Send(NamedTuple):
    sender: str
    recipient: str
    body: str
    reply: int | None
    future: asyncio.Future[int]


def check_text(*values: str) -> None:
    """Refuse, as the caller's bad input, text a PostgreSQL ``text`` column cannot hold."""
    for value in values:
        if "\x00" in value:
            raise InvalidRequest(
                "text stored in the hive may not contain NUL (\\u0000) characters; remove "
                "them and retry"
            )
        if not value.isascii():
            try:
                value.encode()
            except UnicodeEncodeError as exc:
                raise InvalidRequest(
                    f"text stored in the hive must be valid Unicode: {exc.reason} at "
                    f"character {exc.start}; remove it and retry"
                ) from None


def _missing(reply: object) -> NotFound:
    return NotFound(f"in_reply_to #{reply}: no such message")


class SendBatcher:
    """Queues concurrent sends and commits them together, ``WRITERS`` batches at a time."""

    def __init__(
        self, db: PgDatabase, channel: str, publish: Callable[[Iterable[str]], None]
    ) -> None:
        self._db = db
        self._publish = publish
        self._queue: list[_Send] = []
        # Both statements, built once: prepared by psycopg after a few uses.
        self._sql = batch_sql(channel, db.origin, fenced=False)
        self._sql_fenced = batch_sql(channel, db.origin, fenced=True)
        # Drain loops running. Counted down in the step in which a loop sees the queue
        # empty and stops: a send queued after that step starts a new loop, so no send
        # is left in the queue with nobody to commit it.
        self._writers = 0
        # Each drain loop's connection, kept between batches (at most ``WRITERS``).
        self._conns: list[Conn] = []
        self._drainers: set[asyncio.Task[None]] = set()
        # Batches committed, and their rounds summed (statement sent to committed reply,
        # as this process sees it): the bench reports sends per commit and the round.
        self.commits = 0
        self.round_ns = 0

    async def send(self, sender: str, recipient: str, body: str, reply: int | None) -> int:
        check_text(sender, recipient, body)
        if reply is not None and reply > MAX_ID:
            raise _missing(reply)
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        queue = self._queue
        queue.append(_Send(sender, recipient, body, reply, future))
        # A send joining a non-empty queue joins the batch that a running (or just
        # started) loop takes next: another loop would find nothing to do.
        if len(queue) == 1 and self._writers < WRITERS:
            self._writers += 1
            task = asyncio.create_task(self._drain(), name="pg-send-batcher")
            self._drainers.add(task)
            task.add_done_callback(self._drainers.discard)
        # A caller that gives up cancels only its future, not its send: the batch
        # may still commit it (and skips the cancelled future). No shield needed.
        return await future

    async def close(self) -> None:
        if self._drainers:
            await asyncio.wait(set(self._drainers), timeout=30)
        await self._db.give_back(self._conns)

    async def _drain(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
                await self._commit(batch)
        finally:
            self._writers -= 1

    async def _commit(self, batch: list[_Send]) -> None:
        try:
            ids = await self._db.autocommit_kept(self._conns, lambda c: self._insert(c, batch))
        except Unavailable as exc:  # the connection, the pool or the lease: nothing written
            _fail(batch, exc)
            return
        except (HiveError, ValueError) as exc:
            # The server (or the driver) refused the statement: rolled back whole, so
            # each send is retried alone and only the bad one fails.
            if len(batch) == 1:
                _fail(batch, exc if isinstance(exc, HiveError) else _refused(exc))
                return
            log.warning(
                "a batch of %d sends was refused (%s): retrying each alone", len(batch), exc
            )
            for item in batch:
                await self._commit([item])
            return
        except BaseException:
            _fail(batch, Unavailable("the store closed before this send was committed"))
            raise
        self.commits += 1
        self._publish(sorted({batch[i].recipient for i in ids}))
        for i, item in enumerate(batch):
            if item.future.done():
                continue
            msg_id = ids.get(i)
            if msg_id is None:
                item.future.set_exception(_missing(item.reply))
            else:
                item.future.set_result(msg_id)

    async def _insert(self, conn: Conn, batch: list[_Send]) -> dict[int, int]:
        """``{index in batch: message id}`` for every row written."""
        rows = _ENCODE([s[:4] for s in batch])
        epoch = self._db.fence_epoch
        started = perf_counter_ns()
        if epoch is None:
            cur = await conn.execute(self._sql, (rows, now()))
        else:
            cur = await conn.execute(self._sql_fenced, (rows, now(), epoch))
        written = await cur.fetchall()
        self.round_ns += perf_counter_ns() - started
        return {ord_ - 1: msg_id for ord_, msg_id in written}


def _refused(exc: ValueError) -> StorageError:
    return StorageError(f"the hive database refused this send ({exc})")


def _fail(batch: list[_Send], exc: BaseException) -> None:
    for item in batch:
        if not item.future.done():
            item.future.set_exception(exc)
