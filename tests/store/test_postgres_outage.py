"""Losing PostgreSQL under a running store: requests in flight fail clearly, nothing acked is
lost or redelivered, and the store carries on once the server is back — without reopening."""

from __future__ import annotations

import anyio
import psycopg
import pytest

from hyperhive.errors import Unavailable
from hyperhive.store.postgres import open_postgres
from tests.support.postgres import PgCluster
from tests.support.surfaces import until

pytestmark = pytest.mark.anyio


async def test_a_restart_of_postgres_under_a_running_store(pg_private_cluster: PgCluster) -> None:
    cluster = pg_private_cluster
    url = cluster.url(cluster.create_database())
    store = await open_postgres(url, wait_s=2.0)
    try:
        acked = await store.messages.send("alice", "bob", "handled before the outage")
        pending = await store.messages.send("alice", "bob", "delivered, never acked")
        got = await store.messages.recv("bob", 5)
        assert [m.id for m in got.messages] == [acked, pending]
        assert await store.messages.ack_ids("bob", [acked]) == 1

        outcome: list[BaseException] = []

        async def in_flight() -> None:
            try:
                await store.db.tx(lambda c: c.execute("SELECT pg_sleep(60)"))
            except Unavailable as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(in_flight)
            await until(lambda: _sleeping(cluster), within=10)
            await anyio.to_thread.run_sync(cluster.stop)
        assert outcome, "the request in flight did not fail"
        assert "is unavailable" in str(outcome[0]) and "retry" in str(outcome[0])

        # While it is down: a clear, prompt refusal naming the database.
        with pytest.raises(Unavailable, match="unavailable"):
            await store.messages.send("alice", "bob", "while down")

        await anyio.to_thread.run_sync(cluster.start)
        later = await store.messages.send("alice", "bob", "after the restart")
        await until(lambda: store.listener.ready and store.listener.connects >= 2, within=30)

        # A new incarnation gets exactly the unacked mail: never the acked row.
        await store.messages.attach("bob")
        again = await store.messages.recv("bob", 5)
        assert [m.id for m in again.messages] == [pending, later]
        assert {m.body for m in await store.messages.scan()} == {
            "handled before the outage",
            "delivered, never acked",
            "after the restart",
        }
    finally:
        await store.close()


def _sleeping(cluster: PgCluster) -> bool:
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(60)%%'"
        ).fetchone()
    return bool(row and row[0])
