"""Cross-process wake-ups: LISTEN on a connection of its own, sweep on every connect.

Whoever inserts something that wakes an agent runs ``pg_notify(CHANNEL,
'<origin>:<agent>')`` in the same transaction, so the NOTIFY goes out exactly
when the row is committed (``origin`` lets a store skip its own, which it
published at commit). NOTIFY is not stored: a listener that was disconnected (the
server restarted, the network blinked) missed whatever was sent meanwhile, so
after every (re)connect it runs ``sweep``, which wakes every agent that may
have something pending. A spurious wake-up costs a re-check; a lost one would
leave an agent asleep on its mail.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import psycopg
import stamina
from psycopg import AsyncConnection

from hyperhive.errors import HiveError
from hyperhive.store.postgres.database import CONNECT_KWARGS
from hyperhive.store.url import mask_url

__all__ = ["CHANNEL", "Listener"]

log = logging.getLogger(__name__)

CHANNEL = "hyperhive_wake"


class Listener:
    """Hands each NOTIFY payload to ``on_notify``; runs ``sweep()`` after each connect."""

    def __init__(
        self,
        url: str,
        on_notify: Callable[[str], None],
        sweep: Callable[[], Awaitable[None]],
        *,
        channel: str = CHANNEL,
    ) -> None:
        self.url = url
        self._on_notify = on_notify
        self._sweep = sweep
        self._channel = channel
        self._ready = anyio.Event()
        self.connects = 0  # successful LISTEN + sweep rounds, for tests and logs
        self.backend_pid: int | None = None  # the server process listening, while connected

    async def wait_ready(self) -> None:
        """Return once the listener is listening and has swept (again, after a loss)."""
        await self._ready.wait()

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    async def run(self) -> None:
        """Listen until cancelled, reconnecting with jittered backoff after any loss."""
        while True:
            conn = await self._connect()
            try:
                await self._session(conn)
            except (psycopg.Error, HiveError) as exc:
                log.warning("store listener on %s lost: %s", mask_url(self.url), exc)
            finally:
                self.backend_pid = None
                if self._ready.is_set():
                    self._ready = anyio.Event()
                with anyio.CancelScope(shield=True):
                    await conn.close()

    async def _connect(self) -> AsyncConnection[Any]:
        async for attempt in stamina.retry_context(
            on=psycopg.OperationalError,
            attempts=None,
            timeout=None,
            wait_initial=0.05,
            wait_max=2.0,
            wait_jitter=0.25,
        ):
            with attempt:
                conn = await AsyncConnection.connect(self.url, **CONNECT_KWARGS)
                try:
                    await conn.execute(f'LISTEN "{self._channel}"')
                except BaseException:
                    await conn.close()
                    raise
                return conn
        raise AssertionError("unreachable: retries forever")

    async def _session(self, conn: AsyncConnection[Any]) -> None:
        # LISTEN is in force before the sweep, so nothing falls between the two.
        self.backend_pid = conn.info.backend_pid
        await self._sweep()
        self.connects += 1
        self._ready.set()
        await self._hear(conn)

    async def _hear(self, conn: AsyncConnection[Any]) -> None:
        """Hand on every notification as it arrives; raise when the connection fails.

        The socket stays registered with the loop for the whole session and each
        readable event is read straight from libpq: ``conn.notifies()`` registered
        and removed a reader, armed a timer and resolved a future per wake-up, and
        this store hears its own NOTIFY after every commit of sends.
        """
        loop = asyncio.get_running_loop()
        pgconn = conn.pgconn
        encoding = conn.info.encoding
        lost: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            try:
                pgconn.consume_input()  # EOF or a FATAL from the server raises here
                while (note := pgconn.notifies()) is not None:
                    self._on_notify(note.extra.decode(encoding))
            except Exception as exc:  # a loop callback must not raise: it ends the session
                if not lost.done():
                    lost.set_exception(exc)
                loop.remove_reader(fd)

        fd = conn.fileno()
        loop.add_reader(fd, readable)
        try:
            readable()  # whatever libpq had already read with LISTEN's answer
            await lost
        finally:
            loop.remove_reader(fd)
