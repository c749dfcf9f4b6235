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
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from hyperhive.errors import HiveError, StorageError, Unavailable
from hyperhive.store.sqlite.parking import ANSWERED, PARKED, Parked, Parking
from hyperhive.store.sqlite.schema import MIGRATIONS

__all__ = ["MAX_BATCH", "Engine", "Parked", "Tx", "migrate"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
Params = Sequence[object]

# Bound a batch so one commit never holds a huge transaction open.
MAX_BATCH = 512


class Tx:
    """One operation's view of the open transaction, and who it woke."""

    __slots__ = ("changed", "conn")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.changed: set[str] = set()

    def execute(self, sql: str, params: Params = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self.conn.execute(sql, params).fetchone()
        return row

    def all(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        return self.conn.execute(sql, params).fetchall()

    def insert(self, sql: str, params: Params = ()) -> int:
        rowid = self.conn.execute(sql, params).lastrowid
        assert rowid is not None
        return rowid

    def wake(self, agent: str) -> None:
        """Report ``agent`` to the store's subscribers once this commits."""
        self.changed.add(agent)


_Op = Callable[[Tx], Any]
# An operation's value, its failure, and the agents it woke.
_Outcome = tuple[Any, BaseException | None, set[str]]
# The operation, its caller's future and loop, durable, and its parked poll if any.
_Job = tuple[_Op, "asyncio.Future[Any]", asyncio.AbstractEventLoop, bool, Parked[Any] | None]


@contextmanager
def _savepoint(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("SAVEPOINT op")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK TO op")
        conn.execute("RELEASE op")
        raise
    conn.execute("RELEASE op")


_CLOSED = "the hive's database is closed (the coordinator is stopping); retry once it is up"


def _fail_unless_done(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def _connect(path: Path, readonly: bool) -> sqlite3.Connection:
    if readonly:
        conn = sqlite3.connect(
            f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
        )
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA busy_timeout=30000")
        return conn
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


def _refuse_newer(done: set[int], path: Path) -> None:
    known = len(MIGRATIONS)
    if done and max(done) > known:
        raise StorageError(
            f"{path} is at schema version {max(done)}, newer than this hyperhive "
            f"(it knows schema versions up to {known}); run the hyperhive that wrote it, "
            "or upgrade this one"
        )


def migrate(conn: sqlite3.Connection, path: Path) -> int:
    """Apply every numbered migration not yet recorded; return the version.

    A database already past the newest migration this code knows is refused:
    running old code on it could drop data the newer schema relies on.
    """
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        "version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
    known = len(MIGRATIONS)
    _refuse_newer(done, path)
    for version, sql in enumerate(MIGRATIONS, start=1):
        if version in done:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            if callable(sql):
                sql(conn)
            else:
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
    return known


class Engine:
    """The sole handle on one ``hive.db``: migrations, then the writer thread."""

    def __init__(
        self, path: Path, publish: Callable[[Iterable[str]], None], *, readonly: bool = False
    ) -> None:
        """``readonly``: a reader beside the running coordinator (audits, tests); no writes."""
        self.path = path
        self._publish = publish
        self._begin = "BEGIN" if readonly else "BEGIN IMMEDIATE"
        if not readonly:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = _connect(path, readonly)
            if readonly:
                done = {r[0] for r in self._conn.execute("SELECT version FROM schema_migrations")}
                _refuse_newer(done, path)
                self.version = max(done, default=0)
            else:
                self.version = migrate(self._conn, path)
        except sqlite3.DatabaseError as exc:
            raise StorageError(
                f"{path} cannot be opened ({exc}); if it is corrupt, move it aside and "
                "restart (a fresh database is created), or restore it from a backup"
            ) from exc
        self._synchronous_full = True
        self._readonly = readonly
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._parking = Parking()
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
        value: _T | Parked[_T] = await self._submit(op, False, parked)
        return value

    def _submit(self, op: _Op, durable: bool, parked: Parked[Any] | None) -> asyncio.Future[Any]:
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
        conn = _connect(self.path, readonly=True)
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
            self._run_batch(batch)
            if stop:
                return

    def _set_synchronous(self, full: bool) -> None:
        if full != self._synchronous_full and not self._readonly:
            self._conn.execute(f"PRAGMA synchronous={'FULL' if full else 'NORMAL'}")
            self._synchronous_full = full

    def _run_plain(self, batch: list[_Job]) -> list[_Outcome] | None:
        """Every operation straight into the transaction, no savepoints; None if one failed.

        The common case: two statements fewer per operation. On a failure the
        transaction is rolled back, and (in a batch of more than one) the
        caller replays the batch with a savepoint per operation.
        """
        conn = self._conn
        results: list[_Outcome] = []
        for op, *_ in batch:
            tx = Tx(conn)
            try:
                results.append((op(tx), None, tx.changed))
            except Exception as exc:  # the op's failure is its caller's, not the engine's
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if len(batch) == 1:
                    return [(None, _storage_error(exc), set())]
                return None
        return results

    def _run_isolated(self, batch: list[_Job]) -> list[_Outcome]:
        """Each operation in its own savepoint: one failure rolls back only itself."""
        conn = self._conn
        results: list[_Outcome] = []
        for op, *_ in batch:
            tx = Tx(conn)
            try:
                with _savepoint(conn):
                    results.append((op(tx), None, tx.changed))
            except Exception as exc:  # one op's failure is its caller's, not the batch's
                results.append((None, _storage_error(exc), set()))
        return results

    def _run_batch(self, batch: list[_Job]) -> None:
        conn = self._conn
        results: list[_Outcome]
        parked: list[Parked[Any]] = []  # new parks of this batch, then the ones it took
        answered: list[tuple[Parked[Any], Any]] = []
        try:
            self._set_synchronous(any(job[3] for job in batch))
            conn.execute(self._begin)
            plain = self._run_plain(batch)
            if plain is not None:
                results = plain
            else:  # an operation failed and took the transaction with it: replay
                conn.execute(self._begin)
                results = self._run_isolated(batch)
            if conn.in_transaction:
                new = self._parks(batch, results)
                parked = [p for _, p in new]
                if new or self._parking:
                    taken, answered = self._answer_parked(new, results)
                    parked += taken
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            failure = _storage_error(exc)
            results = [(None, failure, set())] * len(batch)
            # What this batch took waits on; its own new parks (not yet registered,
            # so still in their first state) failed with their operations.
            parked = [p for p in parked if p.state != PARKED]
            answered = []
        nothing = self._parking.settle(parked, [p for p, _ in answered]) if parked else []
        # One wake-up of each waiting event loop per batch, not one per operation.
        by_loop: dict[asyncio.AbstractEventLoop, _Settled] = {}
        for p, value in [*answered, *((p, None) for p in nothing)]:
            by_loop.setdefault(p.loop, _Settled(self._publish)).answers.append((p.future, value))
        for (_, future, loop, *_), (value, error, changed) in zip(batch, results, strict=True):
            settled = by_loop.setdefault(loop, _Settled(self._publish))
            settled.futures.append((future, value, error))
            settled.changed.update(changed)
        for loop, settled in by_loop.items():
            try:
                loop.call_soon_threadsafe(settled)
            except RuntimeError:  # that loop has closed: nobody is waiting any more
                pass

    def _parks(self, batch: list[_Job], results: list[_Outcome]) -> list[tuple[int, Parked[Any]]]:
        """This batch's polls that found nothing: their callers get the parked poll."""
        new: list[tuple[int, Parked[Any]]] = []
        for i, job in enumerate(batch):
            p = job[4]
            if p is not None:
                value, error, changed = results[i]
                if error is None and value is None:
                    results[i] = (p, None, changed)
                    new.append((i, p))
        return new

    def _answer_parked(
        self, new: list[tuple[int, Parked[Any]]], results: list[_Outcome]
    ) -> tuple[list[Parked[Any]], list[tuple[Parked[Any], Any]]]:
        """Re-run, inside this transaction, the polls parked for the agents it woke.

        Returns the polls taken from the parking, and the answers found. A poll
        parked by this very batch and woken in it is answered straight to its
        caller. A poll that fails here stays parked: its waiter is woken by the
        commit anyway, and polls again itself (and meets the failure there).
        """
        woken: set[str] = set()
        for _, _, changed in results:
            if changed:
                woken |= changed
        if not woken:
            return [], []
        taken = self._parking.take(woken)
        answered: list[tuple[Parked[Any], Any]] = []
        candidates = [(i, p) for i, p in new if p.agent in woken]
        for i, p in [*candidates, *((-1, p) for p in taken)]:
            try:
                with _savepoint(self._conn):
                    value = p.op(Tx(self._conn))
            except Exception:
                log.exception(
                    "hive.db: a parked poll for %s failed; its waiter polls again", p.agent
                )
                continue
            if value is None:
                continue
            if i >= 0:
                results[i] = (value, None, results[i][2])
                p.state = ANSWERED  # never registered: settle() leaves it
            else:
                answered.append((p, value))
        return taken, answered


class _Settled:
    """A batch's outcome for one event loop: answer parked polls, wake subscribers,
    then the callers (the woken waiter's reply goes out first)."""

    __slots__ = ("answers", "changed", "futures", "publish")

    def __init__(self, publish: Callable[[Iterable[str]], None]) -> None:
        self.publish = publish
        self.answers: list[tuple[asyncio.Future[Any], Any]] = []
        self.futures: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
        self.changed: set[str] = set()

    def __call__(self) -> None:
        for future, value in self.answers:
            if not future.done():
                future.set_result(value)
        if self.changed:
            self.publish(sorted(self.changed))
        for future, value, error in self.futures:
            if future.done():
                continue
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)


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
