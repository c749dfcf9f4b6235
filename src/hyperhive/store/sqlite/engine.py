"""``hive.db``: one SQLite file (WAL, ``synchronous=FULL``), one owner thread.

Every operation is a function of a :class:`Tx`, run on a dedicated thread.
The thread drains whatever is queued and runs it as one transaction, then
commits once: group commit. A caller's await returns only after that
commit, so an ``ok`` the coordinator sends has survived fsync — ``kill -9``
at any moment loses nothing answered.
One failing operation fails alone: its batch is rolled back and replayed
with a savepoint per operation, so only its own writes (and wake-ups) are
undone. Hence an operation touches nothing but its ``Tx``: it may run twice.

An operation may be *lazy* (``durable=False``): a batch made only of lazy
operations commits with ``synchronous=NORMAL``, so it costs no fsync; the
next durable commit fsyncs its WAL frames too. Only marks whose loss is
harmless are lazy (a lost ``delivered_at`` means one more delivery).

A long-poll's poll may be *parked* (:meth:`Engine.run_or_park`): when it
finds nothing, the batch that next wakes its agent re-runs it before
committing, and answers it with its own hand-back (see ``parking``).

This module is the queue and its thread; a batch's transaction is
``groupcommit``'s, the connection and :class:`Tx` are ``tx``'s, the schema's
migrations ``migrate``'s.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from hyperhive.errors import StorageError, Unavailable
from hyperhive.store.sqlite.groupcommit import GroupCommit, Job, Op
from hyperhive.store.sqlite.migrate import migrate, refuse_newer
from hyperhive.store.sqlite.parking import Parked, Parking
from hyperhive.store.sqlite.tx import Tx, connect

__all__ = ["MAX_BATCH", "Engine", "Parked", "Tx", "migrate"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

# Bound a batch so one commit never holds a huge transaction open.
MAX_BATCH = 512


_CLOSED = "the hive's database is closed (the coordinator is stopping); retry once it is up"


def _fail_unless_done(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


class Engine:
    """The sole handle on one ``hive.db``: migrations, then the writer thread."""

    def __init__(
        self, path: Path, publish: Callable[[Iterable[str]], None], *, readonly: bool = False
    ) -> None:
        """``readonly``: a reader beside the running coordinator (audits, tests); no writes."""
        self.path = path
        if not readonly:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = connect(path, readonly)
            if readonly:
                done = {r[0] for r in self._conn.execute("SELECT version FROM schema_migrations")}
                refuse_newer(done, path)
                self.version = max(done, default=0)
            else:
                self.version = migrate(self._conn, path)
        except sqlite3.DatabaseError as exc:
            raise StorageError(
                f"{path} cannot be opened ({exc}); if it is corrupt, move it aside and "
                "restart (a fresh database is created), or restore it from a backup"
            ) from exc
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._parking = Parking()
        self._commit = GroupCommit(self._conn, publish, self._parking, readonly=readonly)
        self._closing = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="hive-db", daemon=True)
        self._thread.start()

    async def run(self, op: Callable[[Tx], _T], *, durable: bool = True) -> _T:
        """Run ``op`` on the database thread inside the next group commit."""
        return await self._submit(op, durable, None)  # type: ignore[no-any-return]

    async def run_or_park(self, agent: str, op: Callable[[Tx], _T | None]) -> _T | Parked[_T]:
        """Run ``op`` lazily; if it finds nothing (``None``), park it for ``agent``.

        The batch that next wakes ``agent`` re-runs ``op`` in its own
        transaction; what it finds is the parked poll's answer. ``op`` must
        only read, and write what a lazy operation may (it can run many times).
        """
        parked: Parked[_T] = Parked(self._parking, agent, op)
        try:
            value: _T | Parked[_T] = await self._submit(op, False, parked)
        except BaseException:
            # Cancelled while its batch ran: a park nobody will withdraw must not stay,
            # or the commit that next wakes the agent hands its mail to no one.
            parked.withdraw()
            raise
        return value

    def queued(self) -> int:
        """Jobs waiting for the engine thread: the next batch, in the making."""
        return self._jobs.qsize()

    def _submit(self, op: Op, durable: bool, parked: Parked[Any] | None) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        # Checked and queued under the lock close() takes: nothing lands behind its stop.
        with self._closing:
            if self._closed:
                raise Unavailable(_CLOSED)
            self._jobs.put((op, future, loop, durable, parked))
        return future

    def integrity_check(self) -> str:
        """SQLite's own verdict on the file ("ok" when sound); read-only, any thread."""
        conn = connect(self.path, readonly=True)
        try:
            return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
        finally:
            conn.close()

    def close(self) -> None:
        """Finish queued work and close the connection; work asked for later is refused
        (``Unavailable``), so nobody waits forever on a closed store."""
        with self._closing:
            if self._closed:
                return
            self._closed = True
            self._jobs.put(None)
        self._thread.join(timeout=10)
        if self._thread.is_alive():
            # Still in a long write: the connection stays its own (a daemon thread).
            log.warning("hive.db: the writer thread did not finish within 10 s of the close")
            return
        self._fail_leftovers()
        self._conn.close()

    def _fail_leftovers(self) -> None:
        """Fail work the thread never took (it had died): its callers must not wait."""
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            if job is None:
                continue
            _op, future, loop, *_ = job
            try:
                loop.call_soon_threadsafe(_fail_unless_done, future, Unavailable(_CLOSED))
            except RuntimeError:  # its loop is closed: nobody waits on it any more
                pass

    def _loop(self) -> None:
        while True:
            first = self._jobs.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while len(batch) < MAX_BATCH:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    stop = True
                    break
                batch.append(job)
            self._commit.run(batch)
            if stop:
                return
