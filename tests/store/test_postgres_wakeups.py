"""Wake-ups across processes on PostgreSQL: NOTIFY with the insert, a sweep after reconnect,
and claims that never overlap."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest

from hyperhive.store.postgres import PostgresStore, open_postgres
from tests.support.surfaces import until

pytestmark = pytest.mark.anyio


@pytest.fixture
async def two(pg_url: str) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    """Two stores on one database, as two coordinators (or a coordinator and a tool) are."""
    a = await open_postgres(pg_url)
    b = await open_postgres(pg_url)
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


async def test_a_send_through_one_store_wakes_the_other(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    a, b = two
    woken: list[str] = []
    b.on_change(woken.append)
    await a.messages.send("alice", "bob", "hello")
    await a.loose_ends.todo_upsert("carol", "bash", "t1", "look at this")
    await until(lambda: {"bob", "carol"} <= set(woken), within=10)


async def test_a_rolled_back_change_wakes_nobody(
    two: tuple[PostgresStore, PostgresStore], pg_url: str
) -> None:
    a, b = two
    woken: list[str] = []
    b.on_change(woken.append)
    with pytest.raises(Exception, match="no such message"):
        await a.messages.send("alice", "dave", "reply to nothing", in_reply_to=424242)
    await a.messages.send("alice", "erin", "marker")  # NOTIFYs arrive in commit order
    await until(lambda: "erin" in woken, within=10)
    assert "dave" not in woken


async def test_a_listener_that_lost_its_connection_sweeps_for_what_it_missed(
    two: tuple[PostgresStore, PostgresStore], pg_url: str
) -> None:
    a, b = two
    woken: list[str] = []
    b.on_change(woken.append)
    pid = b.listener.backend_pid
    assert pid is not None and b.listener.connects == 1
    with psycopg.connect(pg_url, autocommit=True) as conn:
        # Mail whose NOTIFY nobody heard (written without one), then the listener dies.
        conn.execute(
            "INSERT INTO messages(sender, recipient, body, created_at) "
            "VALUES ('x', 'frank', 'missed', 0)"
        )
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    await until(lambda: b.listener.connects == 2 and b.listener.ready, within=20)
    assert "frank" in woken
    assert b.listener.backend_pid not in (None, pid)
    woken.clear()
    await a.messages.send("alice", "gina", "after the reconnect")
    await until(lambda: "gina" in woken, within=10)


async def test_concurrent_takers_never_get_the_same_row(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    a, b = two
    sent = {await a.messages.send("s", "hank", f"m{i}") for i in range(60)}

    async def drain(store: PostgresStore) -> list[int]:
        got: list[int] = []
        while True:
            r = await store.messages.recv("hank", 3)
            if not r.messages:
                return got
            got.extend(m.id for m in r.messages)

    first, second = await asyncio.gather(drain(a), drain(b))
    assert not set(first) & set(second)
    assert set(first) | set(second) == sent
    assert len(first) + len(second) == len(sent)
