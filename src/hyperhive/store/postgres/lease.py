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

The holder learns it lost the lease from a renewal the database refuses (the
row has another epoch), never from the database being away: then nobody can
write, and a holder whose row kept its epoch through the outage reclaims it
(:meth:`Lease.renew`) and serves on, so a database restart is ridden out.

The lease's table and function live outside the numbered migrations: they
exist on PostgreSQL only and are created idempotently here.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import psycopg
from psycopg import AsyncConnection

from hyperhive.errors import HiveError
from hyperhive.store.postgres.database import CONNECT_KWARGS
from hyperhive.store.url import mask_url

__all__ = [
    "DEFAULT_TTL_S",
    "LEASE_SCHEMA",
    "Lease",
    "LeaseHolder",
    "LeaseLost",
    "install_lease",
]

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


class LeaseLost(HiveError):
    """This coordinator no longer holds the lease: it must stop serving at once."""

    code = "lease_lost"


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds the lease now, as a standby reports it."""

    holder: str
    epoch: int
    expires_in: float  # seconds, by the database's clock; negative once expired


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
        self._check_now = anyio.Event()

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
        """Extend the lease; ``False`` once it is lost (another coordinator took it).

        The row still carrying this holder and epoch proves nobody took over, even
        if it expired meanwhile (the database was away): writes in between were
        refused by the fence, so reclaiming it with the same epoch is safe.
        """
        if self.epoch is None:
            return False
        conn = await self._connection()
        started = time.monotonic()
        cur = await conn.execute(
            f"UPDATE coordinator_lease SET expires_at = {_NOW} + %s "
            "WHERE id = 1 AND holder = %s AND epoch = %s RETURNING epoch",
            (self.ttl, self.holder, self.epoch),
        )
        if await cur.fetchone() is None:
            self.epoch = None
            return False
        self._deadline = started + self.ttl
        return True

    async def current(self) -> LeaseHolder | None:
        """The lease row as it stands (``None``: no coordinator ever held it)."""
        conn = await self._connection()
        cur = await conn.execute(
            f"SELECT holder, epoch, expires_at - {_NOW} FROM coordinator_lease WHERE id = 1"
        )
        row = await cur.fetchone()
        return None if row is None else LeaseHolder(str(row[0]), int(row[1]), float(row[2]))

    async def acquire(self, on_standby: Callable[[LeaseHolder], None]) -> int:
        """Stand by until the lease is free or expired, then take it; its epoch.

        ``on_standby`` hears of each holder this one waits for (once per holder and
        epoch), and the database being away is logged and retried, never raised.
        """
        reported: tuple[str, int] | None = None
        while True:
            try:
                epoch = await self.try_acquire()
                if epoch is not None:
                    return epoch
                now = await self.current()
                if now is not None and (now.holder, now.epoch) != reported:
                    reported = (now.holder, now.epoch)
                    on_standby(now)
            except (psycopg.Error, HiveError) as exc:
                log.warning("lease on %s: %s", mask_url(self.url), exc)
                await self.close()
            await anyio.sleep(self.ttl / 5 * random.uniform(0.8, 1.2))

    async def hold(
        self,
        active: Callable[[int], Awaitable[None]],
        on_standby: Callable[[LeaseHolder], None],
    ) -> None:
        """Stand by, then run ``active(epoch)`` for as long as the lease is held.

        Renewal runs beside ``active``. A renewal the database *refuses* (another
        coordinator holds the lease now) cancels ``active`` at once and raises
        :class:`LeaseLost`. A renewal it does not *answer* (the database is away)
        is retried: while it is away every write fails ``Unavailable`` anyway,
        and once it is back either the lease is still this holder's (renewed,
        serving on) or it was taken over (lost). A fenced write (:meth:`lost`)
        renews at once to learn which. ``active`` returning, or this being
        cancelled, releases the lease for a standby.
        """
        epoch = await self.acquire(on_standby)
        self._check_now = anyio.Event()
        lost = False
        try:
            async with anyio.create_task_group() as tg:

                async def renew_forever() -> None:
                    nonlocal lost
                    while await self._renewed_or_away():
                        with anyio.move_on_after(self.ttl / 3):
                            await self._check_now.wait()
                        if self._check_now.is_set():
                            self._check_now = anyio.Event()
                    lost = True
                    tg.cancel_scope.cancel()

                tg.start_soon(renew_forever)
                await active(epoch)
                tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # ``active``'s own error, as itself (the CLI reports a HiveError plainly).
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        finally:
            if not lost:
                with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                    try:
                        await self.release()
                    except (psycopg.Error, HiveError) as exc:
                        log.warning("releasing the lease on %s: %s", mask_url(self.url), exc)
        if lost:
            raise LeaseLost(
                f"{self.holder} lost the coordinator lease (epoch {epoch}): another "
                "coordinator took it over, so this one stops serving"
            )

    async def _renewed_or_away(self) -> bool:
        """One renewal: ``False`` only when refused; retried while the database is away."""
        away_since: float | None = None
        while True:
            try:
                with anyio.fail_after(max(1.0, self.ttl / 2)):
                    renewed = await self.renew()
                if away_since is not None:
                    log.warning(
                        "lease on %s: the database answers again after %.1fs",
                        mask_url(self.url),
                        time.monotonic() - away_since,
                    )
                return renewed
            except (psycopg.Error, HiveError, TimeoutError) as exc:
                if away_since is None:
                    away_since = time.monotonic()
                    log.warning(
                        "lease renewal on %s failed (%s): serving on, its writes wait for "
                        "the database",
                        mask_url(self.url),
                        exc,
                    )
                await self.close()
                await anyio.sleep(random.uniform(0.3, 0.7))

    def lost(self) -> None:
        """A write was fenced: renew now, to learn whether the lease is really gone."""
        self._check_now.set()

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
