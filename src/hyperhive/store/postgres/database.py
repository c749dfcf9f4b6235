"""The coordinator's pooled handle on a PostgreSQL database.

One :meth:`PgDatabase.tx` is one transaction on a pooled connection: it
commits before it returns, so an ``ok`` the coordinator sends is durable on
the server. Connections are checked on checkout (:func:`check_idle`), so a
pool whose server restarted hands out fresh ones instead of failing a request
per dead connection; a failure still in flight becomes :class:`Unavailable`.

TCP keepalives are tuned (idle 3 s, 1 s apart, 3 probes) so that a peer
that vanished — a dead coordinator holding a lease, a server behind a lost
network — is noticed in seconds rather than the kernel's two hours.
"""

from __future__ import annotations

import logging
import secrets
import select
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from hyperhive.errors import HiveError, StorageError
from hyperhive.store.postgres.errors import RETRYABLE, Fenced, scrub, translate
from hyperhive.store.postgres.migrations import migrate
from hyperhive.store.url import mask_url

__all__ = ["CONNECT_KWARGS", "PgDatabase", "check_idle", "connect"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
Conn = AsyncConnection[Any]

CONNECT_TIMEOUT_S = 5
CONNECT_KWARGS: dict[str, Any] = {
    "autocommit": True,  # transactions are explicit: conn.transaction()
    "connect_timeout": CONNECT_TIMEOUT_S,
    "application_name": "hyperhive",
    "keepalives": 1,
    "keepalives_idle": 3,
    "keepalives_interval": 1,
    "keepalives_count": 3,
}
# Serialization failures and deadlocks are retried this many times, then reported.
TX_ATTEMPTS = 3
# A connection a steady writer keeps (autocommit_kept) goes back to the pool after this
# long, so the pool's own lifetime and reconnect rules apply to it too.
KEEP_FOR_S = 300.0


async def check_idle(conn: Conn) -> None:
    """The pool's checkout check, without a round trip when nothing says it is needed.

    An idle connection in autocommit has nothing to read: a server that restarted
    or crashed leaves its FATAL message or EOF on the socket, and only then is the
    connection probed with an empty query (which fails it, and the pool takes or
    makes another). Probing every checkout would cost a round trip per operation.
    """
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    if poller.poll(0):
        await AsyncConnectionPool.check_connection(conn)


async def connect(url: str) -> Conn:
    """One connection, or :class:`Unavailable` naming the masked URL and libpq's reason."""
    try:
        return await AsyncConnection.connect(url, **CONNECT_KWARGS)
    except psycopg.Error as exc:
        raise translate(exc, url) from None


class PgDatabase:
    """A pool plus the one way to use it: :meth:`tx`."""

    def __init__(self, url: str, pool: AsyncConnectionPool[Conn], version: int) -> None:
        self.url = url
        self.pool = pool
        self.version = version
        # Marks this handle's NOTIFYs: its own changes are published locally at commit,
        # so its listener skips them rather than waking everyone twice.
        self.origin = secrets.token_hex(6)
        # With a lease (several coordinators on one database), every write first
        # proves this epoch is still the active one (``lease.py``).
        self.fence_epoch: int | None = None
        # Told at once when a write is refused for a superseded epoch: the coordinator
        # stops serving then, instead of answering every later request with an error.
        self.on_fenced: Callable[[], None] | None = None
        # When each connection kept by autocommit_kept was taken from the pool.
        self.keep_for = KEEP_FOR_S
        self._kept_at: dict[int, float] = {}

    @classmethod
    async def open(
        cls, url: str, *, min_size: int = 2, max_size: int = 16, wait_s: float = 10.0
    ) -> PgDatabase:
        """Connect, migrate and pool; refuse at once (masked URL + reason) if unusable.

        ``wait_s`` bounds how long a request waits for a connection while the
        database is away before it answers ``Unavailable``.
        """
        try:
            conn = await AsyncConnection.connect(url, **CONNECT_KWARGS)
        except psycopg.Error as exc:
            reason = scrub(" ".join(str(exc).split()), url)
            raise StorageError(
                f"the hive database {mask_url(url)} cannot be reached: {reason}; check the "
                "store URL (host, port, user, password, database name) and that PostgreSQL runs"
            ) from None
        try:
            version = await migrate(conn)
        except psycopg.Error as exc:
            raise translate(exc, url) from None
        finally:
            await conn.close()
        pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            kwargs=CONNECT_KWARGS,
            check=check_idle,
            timeout=wait_s,
            reconnect_timeout=0,  # keep trying forever: the database may come back
            open=False,
            name="hyperhive-store",
        )
        try:
            await pool.open(wait=True, timeout=max(wait_s, CONNECT_TIMEOUT_S))
        except PoolTimeout as exc:
            await pool.close()
            raise StorageError(
                f"the hive database {mask_url(url)} accepted one connection but not a pool "
                f"of {min_size} ({exc}); raise max_connections on the server"
            ) from None
        log.info("store: PostgreSQL %s, schema %d", mask_url(url), version)
        return cls(url, pool, version)

    def fence_with(self, epoch: int | None) -> None:
        """Fence every later write by lease ``epoch`` (``None``: no lease, no fence)."""
        self.fence_epoch = epoch

    async def tx(self, op: Callable[[Conn], Awaitable[_T]]) -> _T:
        """Run ``op`` in one transaction; committed when this returns."""
        for attempt in range(1, TX_ATTEMPTS + 1):
            try:
                async with self.pool.connection() as conn, conn.transaction():
                    if self.fence_epoch is not None:
                        await conn.execute("SELECT hyperhive_fence(%s)", (self.fence_epoch,))
                    return await op(conn)
            except RETRYABLE as exc:
                if attempt == TX_ATTEMPTS:
                    raise self._translate(exc) from None
            except (psycopg.Error, PoolTimeout) as exc:
                raise self._translate(exc) from None
        raise AssertionError("unreachable")

    def _translate(self, exc: BaseException) -> HiveError:
        err = translate(exc, self.url)
        if isinstance(err, Fenced) and self.on_fenced is not None:
            self.on_fenced()
        return err

    async def one(self, op: Callable[[Conn], Awaitable[_T]]) -> _T:
        """Run ``op`` (one write statement, its own implicit transaction) without
        BEGIN/COMMIT round trips — unless writes are fenced, then in :meth:`tx`."""
        if self.fence_epoch is not None:
            return await self.tx(op)
        return await self.read(op)

    async def snapshot(self, op: Callable[[Conn], Awaitable[_T]]) -> _T:
        """Run ``op``, reads only, in one REPEATABLE READ READ ONLY transaction (one
        snapshot for several statements; never fenced: it writes nothing)."""
        try:
            async with self.pool.connection() as conn, conn.transaction():
                # First in the transaction, before any query (the fence included).
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                return await op(conn)
        except (psycopg.Error, PoolTimeout) as exc:
            raise self._translate(exc) from None

    async def read(self, op: Callable[[Conn], Awaitable[_T]]) -> _T:
        """Run ``op``, reads only, on a pooled connection in autocommit (never fenced)."""
        return await self.autocommit(op)

    async def autocommit(self, op: Callable[[Conn], Awaitable[_T]]) -> _T:
        """Run ``op`` on a pooled connection in autocommit: each statement is its own
        transaction, and a write must carry the fence itself (``sendbatch.batch_sql``)."""
        try:
            async with self.pool.connection() as conn:
                return await op(conn)
        except (psycopg.Error, PoolTimeout) as exc:
            raise self._translate(exc) from None

    async def autocommit_kept(self, kept: list[Conn], op: Callable[[Conn], Awaitable[_T]]) -> _T:
        """:meth:`autocommit` on a connection the caller keeps between calls.

        For a steady writer (the send batcher): a pool checkout per statement costs
        the pool's lock, the connection's context and the pool's bookkeeping. ``kept``
        holds the caller's idle connections, checked like the pool's own
        (:func:`check_idle`); one that fails goes back to the pool, which replaces it.
        :meth:`give_back` returns them.
        """
        conn = kept.pop() if kept else None
        try:
            if conn is not None:
                if time.monotonic() - self._kept_at.get(id(conn), 0.0) > self.keep_for:
                    await self._put_back(conn)  # the pool recycles it when it is due
                    conn = None
                else:
                    try:
                        await check_idle(conn)
                    except psycopg.Error:
                        await self._put_back(conn)  # the pool discards a broken one
                        conn = None
            if conn is None:
                conn = await self.pool.getconn()
                self._kept_at[id(conn)] = time.monotonic()
            result = await op(conn)
        except BaseException as exc:
            if conn is not None:
                await self._put_back(conn)
            if isinstance(exc, psycopg.Error | PoolTimeout):
                raise self._translate(exc) from None
            raise
        if self.pool.closed:
            await self._put_back(conn)
        else:
            kept.append(conn)
        return result

    async def give_back(self, kept: list[Conn]) -> None:
        """Return connections kept by :meth:`autocommit_kept` to the pool."""
        while kept:
            await self._put_back(kept.pop())

    async def _put_back(self, conn: Conn) -> None:
        self._kept_at.pop(id(conn), None)
        await self.pool.putconn(conn)

    async def close(self) -> None:
        await self.pool.close()
