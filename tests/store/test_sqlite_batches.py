"""SQLite group commit: a batch runs without savepoints, and one failing operation
still fails alone (the batch is rolled back and replayed with a savepoint each)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.errors import NotFound, StorageError
from hyperhive.store.sqlite.engine import Engine, Tx
from tests.support.surfaces import until

pytestmark = pytest.mark.anyio


def _insert(body: str, fail: Exception | None = None) -> Callable[[Tx], int]:
    def op(tx: Tx) -> int:
        msg_id = tx.insert(
            "INSERT INTO messages(sender, recipient, body, created_at) VALUES ('a', ?, ?, 0)",
            (f"to-{body}", body),
        )
        tx.wake(f"to-{body}")
        if fail is not None:
            raise fail  # after its own write: that write must not land
        return msg_id

    return op


def _duplicate_version(tx: Tx) -> None:
    tx.execute("INSERT INTO schema_migrations(version, applied_at) VALUES (1, 0)")


async def _one_batch(engine: Engine, ops: list[Callable[[Tx], Any]]) -> list[Any]:
    """Run ``ops`` as one batch: the engine thread is held until all are queued."""
    held, release = threading.Event(), threading.Event()

    def hold(tx: Tx) -> None:
        held.set()
        release.wait(10)

    outcomes: list[Any] = [None] * len(ops)

    async def run(i: int, op: Callable[[Tx], Any]) -> None:
        try:
            outcomes[i] = await engine.run(op)
        except Exception as exc:
            outcomes[i] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(engine.run, hold)
        await anyio.to_thread.run_sync(held.wait, 10)
        for i, op in enumerate(ops):
            tg.start_soon(run, i, op)
        await until(lambda: engine.queued() == len(ops))  # every run() has queued its job
        release.set()
    return outcomes


def _bodies(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {row[0] for row in conn.execute("SELECT body FROM messages")}
    finally:
        conn.close()


@pytest.fixture
def engine(tmp_path: Path) -> Iterable[tuple[Engine, list[str]]]:
    woken: list[str] = []
    db = Engine(tmp_path / "hive.db", woken.extend)
    yield db, woken
    db.close()


async def test_a_failing_operation_in_a_batch_fails_alone(
    engine: tuple[Engine, list[str]], tmp_path: Path
) -> None:
    db, woken = engine
    ops = [
        _insert("m0"),
        _insert("m1", NotFound("in_reply_to #9: no such message")),
        _insert("m2"),
        _duplicate_version,  # a constraint error from SQLite itself
        _insert("m4"),
    ]
    outcomes = await _one_batch(db, ops)
    assert isinstance(outcomes[1], NotFound)
    assert isinstance(outcomes[3], StorageError) and "UNIQUE" in outcomes[3].message
    ids = [outcomes[i] for i in (0, 2, 4)]
    assert all(isinstance(i, int) for i in ids) and ids == sorted(ids)
    assert _bodies(tmp_path / "hive.db") == {"m0", "m2", "m4"}
    assert sorted(woken) == ["to-m0", "to-m2", "to-m4"]


async def test_a_batch_without_failures_commits_every_operation(
    engine: tuple[Engine, list[str]], tmp_path: Path
) -> None:
    db, woken = engine
    outcomes = await _one_batch(db, [_insert(f"m{i}") for i in range(20)])
    assert outcomes == sorted(outcomes) and len(set(outcomes)) == 20
    assert _bodies(tmp_path / "hive.db") == {f"m{i}" for i in range(20)}
    assert sorted(woken) == sorted(f"to-m{i}" for i in range(20))


async def test_a_lone_failing_operation_leaves_nothing_and_the_engine_goes_on(
    engine: tuple[Engine, list[str]], tmp_path: Path
) -> None:
    db, woken = engine
    with pytest.raises(NotFound):
        await db.run(_insert("gone", NotFound("no")))
    assert await db.run(_insert("kept")) > 0
    assert _bodies(tmp_path / "hive.db") == {"kept"}
    assert woken == ["to-kept"]
