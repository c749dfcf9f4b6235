"""The PostgreSQL store: the repositories over one pool, and the wake-up listener."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from hyperhive.store.base import Store
from hyperhive.store.postgres._repo import Conn, heard
from hyperhive.store.postgres.activity import PgActivity
from hyperhive.store.postgres.agents import PgAgents
from hyperhive.store.postgres.approvals import PgApprovals
from hyperhive.store.postgres.database import PgDatabase
from hyperhive.store.postgres.hosts import PgHosts
from hyperhive.store.postgres.listener import Listener
from hyperhive.store.postgres.loose_ends import PgLooseEnds
from hyperhive.store.postgres.messages import PgMessages
from hyperhive.store.postgres.metalog import PgMetaLog, PgTopology
from hyperhive.store.postgres.placements import PgPlacements
from hyperhive.store.postgres.schedules import PgSchedules
from hyperhive.store.postgres.settings import PgSettings
from hyperhive.store.postgres.snapshots import PgSnapshots
from hyperhive.store.postgres.spend import PgSpend
from hyperhive.store.postgres.trash import PgTrash
from hyperhive.store.url import mask_url

__all__ = ["PostgresStore", "open_postgres"]

log = logging.getLogger(__name__)


class PostgresStore(Store):
    """A hive's state in PostgreSQL. Changes made here are published after commit;
    changes made by another process (a second coordinator) arrive via LISTEN."""

    def __init__(self, db: PgDatabase) -> None:
        super().__init__()
        self.db = db
        self.schema_version = db.version
        feed = self._feed
        self.pg_messages = PgMessages(db, feed)
        self.messages = self.pg_messages
        self.agents = PgAgents(db, feed)
        self.loose_ends = PgLooseEnds(db, feed)
        self.approvals = PgApprovals(db, feed)
        self.schedules = PgSchedules(db, feed)
        self.topology = PgTopology(db, feed)
        self.meta = PgMetaLog(db, feed)
        self.hosts = PgHosts(db, feed)
        self.placements = PgPlacements(db, feed)
        self.spend = PgSpend(db, feed)
        self.trash = PgTrash(db, feed)
        self.snapshots = PgSnapshots(db, feed)
        self.activity = PgActivity(db, feed)
        self.settings = PgSettings(db, feed)
        self.listener = Listener(db.url, self._heard, self._sweep)
        self._listening: asyncio.Task[None] | None = None

    def _heard(self, payload: str) -> None:
        agent = heard(payload, self.db.origin)
        if agent is not None:
            self._feed.publish((agent,))

    @property
    def location(self) -> str:
        return mask_url(self.db.url)

    async def _sweep(self) -> None:
        """Who might have missed a NOTIFY while the listener was away: every agent
        with a row, and every recipient of undelivered mail. A spurious wake-up
        costs one poll; a missed one would leave mail unread."""

        async def op(conn: Conn) -> list[str]:
            cur = await conn.execute(
                "SELECT name FROM agent_state UNION "
                "SELECT DISTINCT recipient FROM messages WHERE acked_at IS NULL "
                "AND delivered_at IS NULL"
            )
            return sorted(str(r[0]) for r in await cur.fetchall())

        self._feed.publish(await self.db.read(op))

    async def start_listening(self) -> None:
        """Start the LISTEN task and return once it listens (idempotent)."""
        if self._listening is None:
            self._listening = asyncio.create_task(self.listener.run(), name="pg-listener")
        await self.listener.wait_ready()

    async def close(self) -> None:
        if self._listening is not None:
            self._listening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listening
            self._listening = None
        await self.pg_messages.batcher.close()
        await self.db.close()


async def open_postgres(url: str, *, wait_s: float = 10.0) -> PostgresStore:
    """Connect, migrate, pool, and listen; refuse an unreachable database at once.

    While the database is away later, a request waits up to ``wait_s`` for it,
    then answers ``Unavailable``.
    """
    db = await PgDatabase.open(url, wait_s=wait_s)
    store = PostgresStore(db)
    try:
        await store.start_listening()
    except BaseException:
        await store.close()
        raise
    return store
