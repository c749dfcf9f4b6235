"""``hive.db``: one SQLite file (WAL, ``synchronous=FULL``), one owner thread.

Every operation is a function of a connection, run on a dedicated thread.
The thread drains whatever is queued and runs it as one transaction, each
operation inside its own savepoint, then commits once: group commit. A
caller's await returns only after that commit, so an ``ok`` the coordinator
sends has survived fsync — ``kill -9`` at any moment loses nothing answered.
One failing operation rolls back its savepoint only.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from hyperhive.core.schema import MIGRATIONS
from hyperhive.errors import HiveError, StorageError

__all__ = ["Database", "atomic"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_Op = Callable[[sqlite3.Connection], Any]
_Job = tuple[_Op, "asyncio.Future[Any]", asyncio.AbstractEventLoop]

# Bound a batch so one commit never holds a huge transaction open.
MAX_BATCH = 512


@contextmanager
def atomic(conn: sqlite3.Connection, name: str = "sp") -> Iterator[None]:
    """A nested savepoint: all of the block or none of it."""
    conn.execute(f"SAVEPOINT {name}")
    try:
        yield
    except BaseException:
        conn.execute(f"ROLLBACK TO {name}")
        conn.execute(f"RELEASE {name}")
        raise
    conn.execute(f"RELEASE {name}")


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


def migrate(conn: sqlite3.Connection) -> int:
    """Apply every numbered migration not yet recorded; return the version."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        "version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
    for version, sql in enumerate(MIGRATIONS, start=1):
        if version in done:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in sql.split(";\n"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations(version, applied_at) VALUES (?, ?)",
                (version, time.time()),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        log.info("hive.db migrated to schema %d", version)
    return len(MIGRATIONS)


class Database:
    """The coordinator's sole handle on ``hive.db``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = _connect(path)
            self.version = migrate(self._conn)
        except sqlite3.DatabaseError as exc:
            raise StorageError(
                f"{path} cannot be opened ({exc}); if it is corrupt, move it aside and "
                "restart (a fresh database is created), or restore it from a backup"
            ) from exc
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="hive-db", daemon=True)
        self._thread.start()

    async def run(self, op: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``op`` on the database thread inside the next group commit."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_T] = loop.create_future()
        self._jobs.put((op, future, loop))
        return await future

    def close(self) -> None:
        """Finish queued work and close the connection."""
        self._jobs.put(None)
        self._thread.join(timeout=10)
        self._conn.close()

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
            self._run_batch(batch)
            if stop:
                return

    def _run_batch(self, batch: list[_Job]) -> None:
        conn = self._conn
        results: list[tuple[Any, BaseException | None]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            for op, _, _ in batch:
                try:
                    with atomic(conn, "op"):
                        results.append((op(conn), None))
                except Exception as exc:  # one op's failure is its caller's, not the batch's
                    results.append((None, _storage_error(exc)))
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            failure = _storage_error(exc)
            results = [(None, failure)] * len(batch)
        # One wake-up of each waiting event loop per batch, not one per operation.
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Any, Any, Any]]] = {}
        for (_, future, loop), (value, error) in zip(batch, results, strict=True):
            by_loop.setdefault(loop, []).append((future, value, error))
        for loop, settled in by_loop.items():
            loop.call_soon_threadsafe(_settle_all, settled)


def _storage_error(exc: Exception) -> BaseException:
    if isinstance(exc, HiveError):
        return exc
    if isinstance(exc, sqlite3.Error):
        text = str(exc)
        hint = ""
        if "full" in text or "disk I/O" in text:
            hint = "; free disk space under HIVE_HOME and retry"
        log.error("hive.db write failed: %s", text)
        return StorageError(f"the hive database refused the write ({text}){hint}")
    return exc


def _settle_all(settled: list[tuple[Any, Any, Any]]) -> None:
    for future, value, error in settled:
        _settle(future, value, error)


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
