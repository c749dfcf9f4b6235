"""Which coordinator is active: an expiring lease row with an epoch, and fenced writes.

Two or more coordinators may run against one database; the one holding the
lease is active, the others stand by. The lease expires ``ttl`` seconds
after its last renewal, by the *database's* clock (no two machines' clocks
are compared), so a holder that was ``kill -9``ed, or cut off by the
network, loses it within ``ttl`` — a standby polling every ``ttl / 5``
takes over within about ``1.2 × ttl`` (6 s at the default 5 s), and the
epoch goes up by one.

Every write of the active coordinator is fenced by its epoch
(:meth:`PgDatabase.fence_with`): the transaction first calls
``hyperhive_fence(epoch)``, which locks the lease row ``FOR SHARE`` and
fails unless that epoch still holds an unexpired lease. A takeover must
lock the row exclusively, so it waits for writes in flight to commit, and
every write after it fails: an old active coordinator cannot commit a
single row once a new one has taken over, however late it wakes up.

The lease's table and function live outside the numbered migrations: they
exist on PostgreSQL only and are created idempotently here.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import psycopg
from psycopg import AsyncConnection

from hyperhive.errors import HiveError
from hyperhive.store.postgres.database import CONNECT_KWARGS
from hyperhive.store.url import mask_url

__all__ = ["DEFAULT_TTL_S", "LEASE_SCHEMA", "Lease", "install_lease"]

log = logging.getLogger(__name__)

DEFAULT_TTL_S = 5.0
_NOW = "extract(epoch FROM clock_timestamp())"
_LOCK_KEY = 0x68686C65617365  # "hhlease": serialises the idempotent schema install

LEASE_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS coordinator_lease (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    holder TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
CREATE OR REPLACE FUNCTION hyperhive_fence(want BIGINT) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM coordinator_lease
    WHERE id = 1 AND epoch = want AND expires_at >= {_NOW}
    FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'lease epoch % is no longer the active one', want
            USING ERRCODE = 'HHF01';
    END IF;
END $$;
"""


async def install_lease(conn: AsyncConnection[Any]) -> None:
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        await conn.execute(LEASE_SCHEMA)


class Lease:
    """One coordinator's claim on the lease, on a connection of its own."""

    def __init__(self, url: str, holder: str, *, ttl: float = DEFAULT_TTL_S) -> None:
        self.url = url
        self.holder = holder
        self.ttl = ttl
        self.epoch: int | None = None
        self._deadline = 0.0  # monotonic: past it, this holder must consider the lease lost
        self._conn: AsyncConnection[Any] | None = None

    async def _connection(self) -> AsyncConnection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = await AsyncConnection.connect(self.url, **CONNECT_KWARGS)
            await install_lease(self._conn)
        return self._conn

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    @property
    def held(self) -> bool:
        return self.epoch is not None and time.monotonic() < self._deadline

    async def try_acquire(self) -> int | None:
        """Take the lease if it is free or expired; its new epoch, or ``None``."""
        conn = await self._connection()
        started = time.monotonic()
        cur = await conn.execute(
            f"""
INSERT INTO coordinator_lease(id, holder, epoch, expires_at) VALUES (1, %s, 1, {_NOW} + %s)
ON CONFLICT (id) DO UPDATE
SET holder = EXCLUDED.holder, epoch = coordinator_lease.epoch + 1,
    expires_at = EXCLUDED.expires_at
WHERE coordinator_lease.expires_at < {_NOW}
RETURNING epoch
""",
            (self.holder, self.ttl),
        )
        row = await cur.fetchone()
        if row is None:
            return None
        self.epoch = int(row[0])
        self._deadline = started + self.ttl
        log.info("%s holds the coordinator lease, epoch %d", self.holder, self.epoch)
        return self.epoch

    async def renew(self) -> bool:
        """Extend the lease; ``False`` once it is lost (expired, or taken over)."""
        if self.epoch is None:
            return False
        conn = await self._connection()
        started = time.monotonic()
        cur = await conn.execute(
            f"UPDATE coordinator_lease SET expires_at = {_NOW} + %s "
            f"WHERE id = 1 AND holder = %s AND epoch = %s AND expires_at >= {_NOW} "
            "RETURNING epoch",
            (self.ttl, self.holder, self.epoch),
        )
        if await cur.fetchone() is None:
            self.epoch = None
            return False
        self._deadline = started + self.ttl
        return True

    async def release(self) -> None:
        """Give the lease up at once (a clean stop), so a standby need not wait it out."""
        if self.epoch is None:
            return
        conn = await self._connection()
        await conn.execute(
            "UPDATE coordinator_lease SET expires_at = 0 WHERE id = 1 AND holder = %s "
            "AND epoch = %s",
            (self.holder, self.epoch),
        )
        self.epoch = None

    async def run(
        self,
        on_acquired: Callable[[int], Awaitable[None]],
        on_lost: Callable[[int], Awaitable[None]],
    ) -> None:
        """Stand by until the lease is free, hold it, and report both transitions.

        Returns after ``on_lost`` (the caller stops acting as the active one);
        cancelling it while active releases the lease.
        """
        while True:
            try:
                epoch = await self.try_acquire()
            except (psycopg.Error, HiveError) as exc:
                log.warning("lease on %s: %s", mask_url(self.url), exc)
                epoch = None
                await self.close()
            if epoch is not None:
                break
            await anyio.sleep(self.ttl / 5 * random.uniform(0.8, 1.2))
        await on_acquired(epoch)
        try:
            while True:
                if not await self._renewed_in_time():
                    break
                await anyio.sleep(self.ttl / 3)
        except BaseException:
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                await self.release()
            raise
        self.epoch = None
        await on_lost(epoch)

    async def _renewed_in_time(self) -> bool:
        """One renewal, retried until the local deadline passes (then: lost)."""
        while time.monotonic() < self._deadline:
            try:
                with anyio.fail_after(max(0.1, self._deadline - time.monotonic())):
                    return await self.renew()
            except (psycopg.Error, HiveError, TimeoutError) as exc:
                log.warning("lease renewal on %s failed: %s", mask_url(self.url), exc)
                await self.close()
                await anyio.sleep(0.2)
        return False
