"""One batch of ``hive.db`` operations run as one transaction: group commit.

Every operation goes straight into the transaction; when one fails, the
batch is rolled back and replayed with a savepoint per operation, so only
the failing one's writes (and wake-ups) are undone. A poll that found
nothing is parked; a batch that wakes its agent re-runs it before committing
(see ``parking``). After the commit each waiting event loop is woken once.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

from hyperhive.store.sqlite.parking import ANSWERED, PARKED, Parked, Parking
from hyperhive.store.sqlite.tx import Tx, savepoint, storage_error

__all__ = ["GroupCommit", "Job", "Op"]

# The engine's own logger: what an operator filters hive.db's records by stays one name.
log = logging.getLogger("hyperhive.store.sqlite.engine")

Op = Callable[[Tx], Any]
# An operation's value, its failure, and the agents it woke.
Outcome = tuple[Any, BaseException | None, set[str]]
# The operation, its caller's future and loop, durable, and its parked poll if any.
Job = tuple[Op, "asyncio.Future[Any]", asyncio.AbstractEventLoop, bool, Parked[Any] | None]


class GroupCommit:
    """Runs the engine's batches on its connection, on its thread only."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        publish: Callable[[Iterable[str]], None],
        parking: Parking,
        *,
        readonly: bool,
    ) -> None:
        self._conn = conn
        self._publish = publish
        self._parking = parking
        self._readonly = readonly
        self._begin = "BEGIN" if readonly else "BEGIN IMMEDIATE"
        self._synchronous_full = True

    def _set_synchronous(self, full: bool) -> None:
        if full != self._synchronous_full and not self._readonly:
            self._conn.execute(f"PRAGMA synchronous={'FULL' if full else 'NORMAL'}")
            self._synchronous_full = full

    def _run_plain(self, batch: list[Job]) -> list[Outcome] | None:
        """Every operation straight into the transaction, no savepoints; None if one failed.

        The common case: two statements fewer per operation. On a failure the
        transaction is rolled back, and (in a batch of more than one) the
        caller replays the batch with a savepoint per operation.
        """
        conn = self._conn
        results: list[Outcome] = []
        for op, *_ in batch:
            tx = Tx(conn)
            try:
                results.append((op(tx), None, tx.changed))
            except Exception as exc:  # the op's failure is its caller's, not the engine's
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if len(batch) == 1:
                    return [(None, storage_error(exc), set())]
                return None
        return results

    def _run_isolated(self, batch: list[Job]) -> list[Outcome]:
        """Each operation in its own savepoint: one failure rolls back only itself."""
        conn = self._conn
        results: list[Outcome] = []
        for op, *_ in batch:
            tx = Tx(conn)
            try:
                with savepoint(conn):
                    results.append((op(tx), None, tx.changed))
            except Exception as exc:  # one op's failure is its caller's, not the batch's
                results.append((None, storage_error(exc), set()))
        return results

    def run(self, batch: list[Job]) -> None:
        """Run ``batch`` as one transaction and hand each caller its outcome."""
        conn = self._conn
        results: list[Outcome]
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
            failure = storage_error(exc)
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

    def _parks(self, batch: list[Job], results: list[Outcome]) -> list[tuple[int, Parked[Any]]]:
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
        self, new: list[tuple[int, Parked[Any]]], results: list[Outcome]
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
                with savepoint(self._conn):
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
