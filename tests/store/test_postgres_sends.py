"""Group-committed sends on PostgreSQL: a bad send in a batch fails alone, the rest land."""

from __future__ import annotations

import json

import anyio
import psycopg
import pytest

from hyperhive.errors import InvalidRequest, NotFound, StorageError
from hyperhive.store.postgres import PostgresStore, open_postgres
from hyperhive.store.postgres.listener import CHANNEL
from hyperhive.store.postgres.sendbatch import batch_sql
from tests.support.surfaces import until

pytestmark = pytest.mark.anyio


async def test_a_bad_reply_in_a_batch_fails_alone(pg_url: str) -> None:
    store = await open_postgres(pg_url)
    try:
        root = await store.messages.send("alice", "bob", "root")
        seen: list[str] = []
        store.on_change(seen.append)
        landed: dict[int, int] = {}
        refused: list[int] = []

        async def send(i: int) -> None:
            reply = 999_999 if i % 7 == 3 else root
            try:
                landed[i] = await store.messages.send("alice", f"r{i % 3}", f"m{i}", reply)
            except NotFound:
                refused.append(i)

        async with anyio.create_task_group() as tg:  # all queued before the first commit
            for i in range(40):
                tg.start_soon(send, i)

        assert sorted(refused) == [i for i in range(40) if i % 7 == 3]
        assert len(set(landed.values())) == len(landed) == 40 - len(refused)
        # One batch, its ids drawn in the order the sends were queued.
        assert sorted(landed, key=landed.__getitem__) == sorted(landed)
        rows = {m.id: m for m in await store.messages.scan(root)}
        assert set(rows) == set(landed.values())
        for i, msg_id in landed.items():
            assert rows[msg_id].body == f"m{i}" and rows[msg_id].recipient == f"r{i % 3}"
            assert rows[msg_id].in_reply_to == root
        assert set(seen) == {"r0", "r1", "r2"}
    finally:
        await store.close()


async def _send_all(
    store: PostgresStore, bodies: list[str]
) -> tuple[dict[int, int], dict[int, Exception]]:
    """Send every body at once (one batch); each caller's id or error, by index."""
    landed: dict[int, int] = {}
    failed: dict[int, Exception] = {}

    async def send(i: int, body: str) -> None:
        try:
            landed[i] = await store.messages.send("alice", "bob", body)
        except (InvalidRequest, StorageError) as exc:
            failed[i] = exc

    async with anyio.create_task_group() as tg:
        for i, body in enumerate(bodies):
            tg.start_soon(send, i, body)
    return landed, failed


async def _bodies(store: PostgresStore) -> list[str]:
    return [m.body for m in await store.messages.scan()]


async def test_text_postgres_cannot_hold_fails_alone_as_bad_input(pg_url: str) -> None:
    store = await open_postgres(pg_url)
    try:
        bodies = [f"m{i}" for i in range(30)]
        bodies[4] = "a NUL \x00 here"
        bodies[17] = "a lone surrogate \ud800 here"
        landed, failed = await _send_all(store, bodies)

        assert sorted(failed) == [4, 17]
        assert "NUL" in str(failed[4]) and "Unicode" in str(failed[17])
        assert all(isinstance(e, InvalidRequest) for e in failed.values())
        assert await _bodies(store) == [b for i, b in enumerate(bodies) if i not in failed]
    finally:
        await store.close()


async def test_a_batch_the_server_refuses_is_retried_send_by_send(pg_url: str) -> None:
    # A rule only the server knows (a CHECK constraint): the batch's one statement
    # is refused whole, so each send is retried alone and only the bad one fails.
    store = await open_postgres(pg_url)
    try:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("ALTER TABLE messages ADD CONSTRAINT no_poison CHECK (body <> 'poison')")
        bodies = [f"m{i}" for i in range(30)]
        bodies[11] = "poison"
        landed, failed = await _send_all(store, bodies)

        assert list(failed) == [11]
        assert isinstance(failed[11], StorageError) and "no_poison" in str(failed[11])
        assert len(set(landed.values())) == 29
        assert await _bodies(store) == [b for b in bodies if b != "poison"]
        rows = {m.id: m.body for m in await store.messages.scan()}
        assert all(rows[landed[i]] == bodies[i] for i in landed)
    finally:
        await store.close()


async def test_pooled_connections_whose_server_side_died_are_replaced_unseen(
    pg_url: str,
) -> None:
    """A checkout skips the probe round trip only while the socket is quiet: a backend
    that was terminated leaves its FATAL on the socket, and the pool replaces it."""
    store = await open_postgres(pg_url)
    try:
        await store.messages.send("alice", "bob", "before")
        listener = store.listener.backend_pid
        with psycopg.connect(pg_url, autocommit=True) as conn:
            cur = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = 'hyperhive' "
                "AND pid <> pg_backend_pid() AND pid <> %s",
                (listener,),
            )
            row = cur.fetchone()
            assert row is not None and row[0] >= 2  # the whole pool
        await until(lambda: _backends(pg_url) == 1, within=10)  # the listener's alone
        for i in range(4):  # more than the pool held: every dead one is met
            await store.messages.send("alice", "bob", f"after {i}")
        assert len(await store.messages.inbox("bob")) == 5
    finally:
        await store.close()


def _backends(url: str) -> int:
    """Server processes of the store's (``application_name`` hyperhive) on its database."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'hyperhive' AND pid <> pg_backend_pid()"
        ).fetchone()
    return int(row[0]) if row else 0


async def test_a_batch_carries_any_text_exactly(pg_url: str) -> None:
    # A batch travels as one JSON text: whatever JSON escapes or passes through raw
    # (quotes, backslashes, control characters, a JSON-looking body, non-BMP, U+2028)
    # lands byte for byte, sender and recipient included.
    store = await open_postgres(pg_url)
    try:
        odd = [
            'a "quoted" \\ back\\slash',
            "line\nbreak\ttab\rreturn\x01\x1f\x7f",
            '["not", "a", "row"], {"k": null}',
            "emoji 🐝 and 中文 and \u2028\u2029 and \ufeff",
            "\\u0000 is only text here",
            "",
            "x" * 100_000,
        ]
        bodies = [b for b in odd for _ in range(3)]
        landed: dict[int, int] = {}

        async def send(i: int, body: str) -> None:
            sender = f"s-{odd.index(body)}-é"
            landed[i] = await store.messages.send(sender, f'r"{i % 2}\\', body)

        async with anyio.create_task_group() as tg:
            for i, body in enumerate(bodies):
                tg.start_soon(send, i, body)
        rows = {m.id: m for m in await store.messages.scan()}
        assert len(rows) == len(bodies)
        for i, msg_id in landed.items():
            row = rows[msg_id]
            assert row.body == bodies[i]
            assert row.sender == f"s-{odd.index(bodies[i])}-é"
            assert row.recipient == f'r"{i % 2}\\'
    finally:
        await store.close()


async def test_the_batchers_kept_connections_go_back_when_the_store_closes(
    pg_url: str,
) -> None:
    # The batcher keeps its connections between batches (no pool checkout per batch);
    # closing the store must still leave no server process of the store's behind.
    store = await open_postgres(pg_url)
    try:
        await _send_all(store, [f"m{i}" for i in range(20)])
        assert await store.messages.send("alice", "bob", "one more")
    finally:
        await store.close()
    await until(lambda: _backends(pg_url) == 0, within=10)


async def test_sends_in_flight_together_commit_as_one_transaction(pg_url: str) -> None:
    # Group commit is what the send rate rests on: sends queued together are one
    # statement, one transaction (their rows share its xmin), one commit round.
    store = await open_postgres(pg_url)
    try:
        await store.messages.send("alice", "bob", "warm")
        batcher = store.pg_messages.batcher
        commits, rounds = batcher.commits, batcher.round_ns
        landed, failed = await _send_all(store, [f"m{i}" for i in range(8)])
        assert not failed and len(set(landed.values())) == 8
        assert batcher.commits == commits + 1
        assert batcher.round_ns > rounds
        with psycopg.connect(pg_url, autocommit=True) as conn:
            xmins = conn.execute(
                "SELECT DISTINCT xmin::text FROM messages WHERE id = ANY(%s)",
                (list(landed.values()),),
            ).fetchall()
        assert len(xmins) == 1
    finally:
        await store.close()


async def test_a_batch_checks_its_replies_by_key_not_by_scanning_the_mailbox(
    pg_url: str,
) -> None:
    # A batch holding a reply looks that one id up. Written as EXISTS, the planner
    # chose to hash every id in messages instead (a sequential scan of the whole
    # mailbox per batch) for any table small enough to hash: tens of thousands of rows.
    store = await open_postgres(pg_url)
    try:
        root = await store.messages.send("alice", "bob", "root")
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO messages(sender, recipient, body, created_at) "
                "SELECT 'a', 'b', 'filler', 0 FROM generate_series(1, 20000)"
            )
            conn.execute("ANALYZE messages")
            rows = json.dumps([["alice", "bob", "re", root], ["alice", "bob", "new", None]])
            with conn.transaction(force_rollback=True):
                plan = conn.execute(
                    "EXPLAIN " + batch_sql(CHANNEL, "origin", fenced=False), (rows, 0.0)
                ).fetchall()
        text = "\n".join(str(r[0]) for r in plan)
        assert "Seq Scan on messages" not in text and "hashed SubPlan" not in text, text
        # ...and the reply is still checked: a missing one fails alone, as in any batch.
        landed = await store.messages.send("alice", "bob", "re", root)
        with pytest.raises(NotFound):
            await store.messages.send("alice", "bob", "re", 10**12)
        assert (await store.messages.get(landed)).in_reply_to == root  # type: ignore[union-attr]
    finally:
        await store.close()


async def test_the_batchers_kept_connections_go_back_to_the_pool_when_due(pg_url: str) -> None:
    # Kept between batches, a connection still goes back to the pool once it has been
    # kept for ``keep_for``: the pool's lifetime and reconnect rules apply to it too.
    store = await open_postgres(pg_url)
    try:

        def checkouts() -> int:
            return store.db.pool.get_stats().get("requests_num", 0)

        await store.messages.send("alice", "bob", "warm")
        before = checkouts()
        for i in range(5):
            await store.messages.send("alice", "bob", f"kept {i}")
        assert checkouts() == before  # one connection, kept: no checkout per batch

        store.db.keep_for = 0.0  # every kept connection is due at once
        for i in range(5):
            await store.messages.send("alice", "bob", f"due {i}")
        assert checkouts() == before + 5
        assert len(await store.messages.inbox("bob")) == 11
    finally:
        await store.close()
    await until(lambda: _backends(pg_url) == 0, within=10)
