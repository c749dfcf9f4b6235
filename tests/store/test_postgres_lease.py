"""One active coordinator per database: an expiring lease with an epoch, fenced writes, and a
standby that takes over when the active one dies (a real process, ``kill -9``)."""

from __future__ import annotations

import signal
import sys
import textwrap
from collections.abc import AsyncIterator

import anyio
import psycopg
import pytest

from hyperhive.store.postgres import PostgresStore, open_postgres
from hyperhive.store.postgres.errors import Fenced
from hyperhive.store.postgres.lease import Lease, LeaseHolder, LeaseLost
from tests.support.surfaces import until, until_async

pytestmark = pytest.mark.anyio

TTL = 2.0


@pytest.fixture
async def leases(pg_url: str) -> AsyncIterator[tuple[Lease, Lease]]:
    a, b = Lease(pg_url, "coord-a", ttl=TTL), Lease(pg_url, "coord-b", ttl=TTL)
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


async def _until_acquired(lease: Lease, within: float = 30) -> int:
    # The database's clock expires the lease: nothing to wait on but the row itself.
    epoch: int = await until_async(lease.try_acquire, within)
    return epoch


async def test_one_holder_at_a_time_and_the_epoch_moves_on_takeover(
    leases: tuple[Lease, Lease],
) -> None:
    a, b = leases
    assert await a.try_acquire() == 1
    assert await b.try_acquire() is None  # held: the standby waits
    assert await a.renew()
    assert await b.try_acquire() is None
    # a stops renewing (it died): once the lease expires, b takes it with the next epoch.
    assert await _until_acquired(b) == 2
    assert not await a.renew()
    assert a.epoch is None and b.epoch == 2


async def test_a_clean_release_hands_over_at_once(leases: tuple[Lease, Lease]) -> None:
    a, b = leases
    assert await a.try_acquire() == 1
    await a.release()
    assert await b.try_acquire() == 2


async def test_writes_of_a_superseded_epoch_are_refused_and_leave_nothing(
    pg_url: str, leases: tuple[Lease, Lease]
) -> None:
    a, b = leases
    old: PostgresStore = await open_postgres(pg_url)
    new: PostgresStore = await open_postgres(pg_url)
    try:
        old.db.fence_with(await a.try_acquire())
        first = await old.messages.send("alice", "bob", "while active")
        await old.messages.recv("bob", 5)
        new.db.fence_with(await _until_acquired(b))

        with pytest.raises(Fenced, match="no longer the active one"):
            await old.messages.send("alice", "bob", "after the takeover")
        with pytest.raises(Fenced):
            await old.messages.ack_until("bob", first)
        with pytest.raises(Fenced):
            await old.loose_ends.todo_upsert("bob", "x", "k", "v")
        async with anyio.create_task_group() as tg:  # a batch of sends, fenced as one
            for i in range(5):
                tg.start_soon(_refused_send, old, i)

        assert await new.messages.send("alice", "bob", "from the new active one") > first
        # Snapshot reads (one REPEATABLE READ transaction) work for a fenced store too.
        await new.loose_ends.todo_upsert("bob", "x", "k", "v")
        assert [t.key for t in (await new.loose_ends.open(["bob"])).todos] == ["k"]
        assert (await new.schedules.due(0.0)).reminders == ()
        bodies = [m.body for m in await new.messages.scan()]
        assert bodies == ["while active", "from the new active one"]
        assert (await new.messages.get(first)).acked_at is None  # type: ignore[union-attr]
    finally:
        await old.close()
        await new.close()


async def _refused_send(store: PostgresStore, i: int) -> None:
    with pytest.raises(Fenced):
        await store.messages.send("alice", "bob", f"late {i}")


HOLDER = textwrap.dedent(
    """
    import sys, anyio
    from hyperhive.store.postgres.lease import Lease, LeaseHolder, LeaseLost

    async def main() -> None:
        lease = Lease(sys.argv[1], "doomed", ttl=float(sys.argv[2]))
        async def active(epoch: int) -> None:
            print(f"active {epoch}", flush=True)
            await anyio.sleep_forever()
        await lease.hold(active, lambda holder: None)

    anyio.run(main)
    """
)


async def test_a_standby_takes_over_from_a_killed_active_coordinator(pg_url: str) -> None:
    standby = Lease(pg_url, "standby", ttl=TTL)
    took_over: list[int] = []
    waited_for: list[LeaseHolder] = []
    async with await anyio.open_process([sys.executable, "-c", HOLDER, pg_url, str(TTL)]) as doomed:
        try:
            assert doomed.stdout is not None
            line = b""
            with anyio.fail_after(30):
                while not line.endswith(b"\n"):
                    line += await doomed.stdout.receive(1)
            assert line.startswith(b"active "), line
            epoch = int(line.split()[1])

            async def active(e: int) -> None:
                took_over.append(e)
                await anyio.sleep_forever()

            async with anyio.create_task_group() as tg:
                tg.start_soon(standby.hold, active, waited_for.append)
                await until(lambda: waited_for, within=30)
                assert [(h.holder, h.epoch) for h in waited_for] == [("doomed", epoch)]
                doomed.send_signal(signal.SIGKILL)
                await doomed.wait()
                await until(lambda: took_over, within=30)
                assert took_over == [epoch + 1]
                assert standby.held
                tg.cancel_scope.cancel()
            # Cancelled while active: the lease was released for the next one at once.
            assert (await standby.current()).expires_in < 0  # type: ignore[union-attr]
        finally:
            if doomed.returncode is None:
                doomed.kill()
                await doomed.wait()
            await standby.close()


async def test_a_holder_whose_lease_was_taken_over_stops_with_lease_lost(
    pg_url: str, leases: tuple[Lease, Lease]
) -> None:
    a, b = leases
    running: list[int] = []
    cancelled: list[int] = []

    async def active(epoch: int) -> None:
        running.append(epoch)
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.append(epoch)

    async def take_over() -> None:
        await until(lambda: running, within=30)
        # a's lease lapses as a frozen process's would (it is the row that expires)...
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            await conn.execute("UPDATE coordinator_lease SET expires_at = 0")
        assert await b.try_acquire() == 2  # ...and b takes it over

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(take_over)
            with pytest.raises(LeaseLost, match=r"lost the coordinator lease \(epoch 1\)"):
                await a.hold(active, lambda holder: None)
    assert running == cancelled == [1]
    assert (await b.current()).holder == "coord-b"  # type: ignore[union-attr]
