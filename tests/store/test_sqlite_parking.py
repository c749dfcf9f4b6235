"""Parked polls on the SQLite engine: the commit that wakes an agent answers its parked
poll in the same transaction and the same hand-back, with no batch of its own."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.errors import NotFound
from hyperhive.store.sqlite.engine import Engine, Parked, Tx
from tests.support.surfaces import until

pytestmark = pytest.mark.anyio


def _send(recipient: str, body: str = "hi") -> Callable[[Tx], int]:
    def op(tx: Tx) -> int:
        msg_id = tx.insert(
            "INSERT INTO messages(sender, recipient, body, created_at) VALUES ('s', ?, ?, 0)",
            (recipient, body),
        )
        tx.wake(recipient)
        return msg_id

    return op


class _Poll:
    """Takes ``agent``'s undelivered rows (marks them delivered); counts its runs."""

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.runs = 0
        self.hold: threading.Event | None = None  # set: the next run waits for it
        self.holding = threading.Event()

    def __call__(self, tx: Tx) -> list[str] | None:
        self.runs += 1
        if self.hold is not None:
            self.holding.set()
            self.hold.wait(10)
            self.hold = None
        rows = tx.all(
            "SELECT id, body FROM messages WHERE recipient = ? AND delivered_at IS NULL "
            "ORDER BY id",
            (self.agent,),
        )
        for row in rows:
            tx.execute("UPDATE messages SET delivered_at = 1 WHERE id = ?", (row["id"],))
        return [str(r["body"]) for r in rows] or None


@pytest.fixture
def engine(tmp_path: Path) -> Iterable[tuple[Engine, list[str]]]:
    woken: list[str] = []
    db = Engine(tmp_path / "hive.db", woken.extend)
    yield db, woken
    db.close()


async def _parked(db: Engine, poll: _Poll) -> Parked[list[str]]:
    got = await db.run_or_park(poll.agent, poll)
    assert isinstance(got, Parked)
    return got


async def test_the_commit_that_wakes_the_agent_answers_its_parked_poll(
    engine: tuple[Engine, list[str]],
) -> None:
    db, woken = engine
    poll = _Poll("a")
    parked = await _parked(db, poll)
    assert poll.runs == 1 and not parked.future.done()

    await db.run(_send("b"))  # another agent's mail: the parked poll is not re-run
    assert poll.runs == 1 and not parked.future.done()

    await db.run(_send("a", "for a"))
    # Answered with the send's own hand-back: done by the time the send's caller resumes.
    assert parked.future.done() and poll.runs == 2
    assert parked.withdraw() is False
    assert await parked.answer() == ["for a"]
    assert woken == ["b", "a"]  # the wake-up is still published (the waiter sleeps on it)

    # Answered once: a later send for the agent is left for its next poll.
    await db.run(_send("a", "later"))
    assert poll.runs == 2
    assert await db.run(poll) == ["later"]


async def test_a_withdrawn_poll_is_never_run_again(engine: tuple[Engine, list[str]]) -> None:
    db, _ = engine
    poll = _Poll("a")
    parked = await _parked(db, poll)
    assert parked.withdraw() is True
    assert parked.withdraw() is True
    await db.run(_send("a"))
    assert poll.runs == 1
    assert await db.run(poll) == ["hi"]  # the mail is still undelivered


async def test_a_parked_poll_that_finds_nothing_stays_parked(
    engine: tuple[Engine, list[str]],
) -> None:
    db, _ = engine
    first, second = _Poll("a"), _Poll("a")
    p1, p2 = await _parked(db, first), await _parked(db, second)
    await db.run(_send("a", "one"))
    # Both re-ran in the send's transaction; the first took the row, the second found nothing.
    assert (first.runs, second.runs) == (2, 2)
    assert p1.future.done() and not p2.future.done()
    assert await p1.answer() == ["one"]
    await db.run(_send("a", "two"))
    assert await p2.answer() == ["two"]


async def test_withdrawn_while_a_batch_holds_it_the_answer_still_arrives(
    engine: tuple[Engine, list[str]],
) -> None:
    db, _ = engine
    poll = _Poll("a")
    parked = await _parked(db, poll)
    poll.hold = threading.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(db.run, _send("a", "caught"))
        await anyio.to_thread.run_sync(poll.holding.wait, 10)
        # The batch has taken it: withdrawing says an answer is coming, and it does.
        assert parked.withdraw() is False
        poll.hold.set()
        assert await parked.answer() == ["caught"]


async def test_withdrawn_while_held_by_a_batch_that_finds_nothing_answers_none(
    engine: tuple[Engine, list[str]],
) -> None:
    db, _ = engine
    poll = _Poll("a")
    parked = await _parked(db, poll)
    poll.hold = threading.Event()

    def wake_only(tx: Tx) -> None:
        tx.wake("a")  # a wake-up with nothing for this poll (a todo it does not count)

    async with anyio.create_task_group() as tg:
        tg.start_soon(db.run, wake_only)
        await anyio.to_thread.run_sync(poll.holding.wait, 10)
        assert parked.withdraw() is False
        poll.hold.set()
        assert await parked.answer() is None
    await db.run(_send("a"))
    assert poll.runs == 2  # withdrawn: not parked again


async def test_a_failing_parked_poll_stays_parked_and_the_batch_commits(
    engine: tuple[Engine, list[str]], tmp_path: Path
) -> None:
    db, woken = engine
    calls = 0

    def flaky(tx: Tx) -> str | None:
        nonlocal calls
        calls += 1
        tx.execute("UPDATE messages SET delivered_at = 7 WHERE recipient = 'a'")
        if calls == 2:
            raise NotFound("a bug in a poll")
        return "found" if calls > 2 else None

    parked = await db.run_or_park("a", flaky)
    assert isinstance(parked, Parked)
    first = await db.run(_send("a", "kept"))  # the poll fails in this batch: rolled back alone
    assert woken == ["a"] and not parked.future.done()
    assert (
        await db.run(
            lambda tx: tx.one("SELECT delivered_at FROM messages WHERE id = ?", (first,))[0]
        )
        is None
    )
    await db.run(_send("a", "again"))
    assert await parked.answer() == "found"


async def test_parked_and_woken_in_one_batch_the_caller_gets_the_answer(
    engine: tuple[Engine, list[str]],
) -> None:
    db, _ = engine
    held, release = threading.Event(), threading.Event()

    def hold(tx: Tx) -> None:
        held.set()
        release.wait(10)

    poll = _Poll("a")
    got: list[Any] = []

    async def park() -> None:
        got.append(await db.run_or_park("a", poll))

    async with anyio.create_task_group() as tg:
        tg.start_soon(db.run, hold)
        await anyio.to_thread.run_sync(held.wait, 10)
        tg.start_soon(park)
        await until(lambda: db.queued() == 1)  # the poll first
        tg.start_soon(db.run, _send("a", "same batch"))
        await until(lambda: db.queued() == 2)  # both queued behind ``hold``: one batch
        release.set()
    # The poll ran first and found nothing; the send after it in the batch woke it.
    assert got == [["same batch"]] and poll.runs == 2


async def test_a_poll_cancelled_while_its_batch_runs_is_never_parked_for_no_one(
    engine: tuple[Engine, list[str]],
) -> None:
    # A harness's wait cancelled at once (its turn crashed as it began): the poll then
    # parked for nobody, and the next commit waking the agent (the new incarnation's
    # redelivery) marked its mail delivered to no one.
    db, _ = engine
    poll = _Poll("a")
    poll.hold = threading.Event()
    with anyio.CancelScope() as scope:

        async def cancel_once_running() -> None:
            await anyio.to_thread.run_sync(poll.holding.wait)
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_once_running)
            await db.run_or_park("a", poll)
    assert scope.cancelled_caught
    poll.hold.set()  # the batch finishes: the poll found nothing

    await db.run(_send("a", "for the next waiter"))

    assert poll.runs == 1  # not re-run by the commit: nobody parked it
    fresh = _Poll("a")
    assert await db.run_or_park("a", fresh) == ["for the next waiter"]
