"""Mailbox contract: at-least-once, acked never redelivered, attach redelivers, wake-ups."""

from __future__ import annotations

import anyio
import pytest

from hyperhive.errors import InvalidRequest, NotFound
from hyperhive.store import Store
from hyperhive.store.rows import MessageCounts
from tests.support.stores import Backend

pytestmark = pytest.mark.anyio


async def test_recv_hands_each_row_out_once_oldest_first(store: Store) -> None:
    ids = [await store.messages.send("alice", "bob", f"m{i}") for i in range(3)]
    first = await store.messages.recv("bob", 2)
    assert not first.fenced
    assert [m.id for m in first.messages] == ids[:2]
    assert [m.body for m in first.messages] == ["m0", "m1"]
    assert all(m.sender == "alice" and m.recipient == "bob" for m in first.messages)
    second = await store.messages.recv("bob", 5)
    assert [m.id for m in second.messages] == ids[2:]
    assert (await store.messages.recv("bob", 5)).messages == ()
    assert (await store.messages.recv("alice", 5)).messages == ()


async def test_attach_redelivers_unacked_but_never_acked(store: Store) -> None:
    a, b, c = [await store.messages.send("alice", "bob", f"m{i}") for i in range(3)]
    await store.messages.recv("bob", 5)
    assert await store.messages.ack_ids("bob", [b]) == 1
    first = await store.messages.attach("bob")
    again = await store.messages.recv("bob", 5)
    assert [m.id for m in again.messages] == [a, c]
    assert await store.messages.ack_until("bob", c) == 2
    assert await store.messages.attach("bob") == first + 1
    assert (await store.messages.recv("bob", 5)).messages == ()
    got = await store.messages.get(b)
    assert got is not None and got.acked and got.delivered_at is not None


async def test_a_keyed_send_lands_once_per_sender_recipient_and_key(store: Store) -> None:
    first, new = await store.messages.send_keyed("forge", "bob", "review", "n1")
    assert new
    woken: list[str] = []
    store.on_change(woken.append)
    again, new = await store.messages.send_keyed("forge", "bob", "review (resent)", "n1")
    assert (again, new) == (first, False) and woken == []
    # The key belongs to one producer and one recipient.
    for sender, recipient in (("matrix", "bob"), ("forge", "carol")):
        _, new = await store.messages.send_keyed(sender, recipient, "x", "n1")
        assert new
    got = await store.messages.recv("bob", 10)
    assert [(m.sender, m.body) for m in got.messages] == [("forge", "review"), ("matrix", "x")]


async def test_acks_are_scoped_to_the_recipient(store: Store) -> None:
    to_bob = await store.messages.send("alice", "bob", "for bob")
    to_carol = await store.messages.send("alice", "carol", "for carol")
    assert await store.messages.ack_ids("bob", [to_carol]) == 0
    assert await store.messages.ack_until("bob", to_carol) == 1
    carol = await store.messages.recv("carol", 5)
    assert [m.id for m in carol.messages] == [to_carol]
    assert await store.messages.ack_ids("bob", [to_bob]) == 0  # already acked: not counted twice


async def test_at_least_once_across_reopen(backend: Backend) -> None:
    store = await backend.open()
    handed = await store.messages.send("alice", "bob", "handed out, not acked")
    acked = await store.messages.send("alice", "bob", "acked")
    await store.messages.recv("bob", 5)
    await store.messages.ack_ids("bob", [acked])
    await store.close()

    store = await backend.open()
    try:
        await store.messages.attach("bob")
        again = await store.messages.recv("bob", 5)
        assert [m.id for m in again.messages] == [handed]
        assert (await store.messages.get(acked)) is not None
    finally:
        await store.close()


async def test_a_reply_to_nothing_is_refused_and_stores_nothing(store: Store) -> None:
    with pytest.raises(NotFound, match="#999"):
        await store.messages.send("alice", "bob", "reply", in_reply_to=999)
    assert await store.messages.scan() == []
    plain = await store.messages.send("alice", "bob", "not a reply", in_reply_to=0)
    got = await store.messages.get(plain)
    assert got is not None and got.in_reply_to is None


async def test_fence_stops_until_the_next_attach(store: Store) -> None:
    await store.messages.send("alice", "bob", "waiting")
    await store.messages.fence("bob")
    assert (await store.messages.recv("bob", 5)).fenced
    stop = await store.messages.poll("bob", 0, 5)
    assert stop is not None and stop.stop and stop.messages == ()
    incarnation = await store.messages.attach("bob")
    assert incarnation == (await store.agents.get("bob")).incarnation
    after = await store.messages.recv("bob", 5)
    assert not after.fenced and [m.body for m in after.messages] == ["waiting"]


async def test_poll_wakes_for_mail_todos_and_compaction_only(store: Store) -> None:
    assert await store.messages.poll("bob", 0, 5) is None
    await store.messages.send("alice", "bob", "hi")
    mail = await store.messages.poll("bob", 0, 5)
    assert mail is not None and [m.body for m in mail.messages] == ["hi"]
    assert not mail.todos_changed and not mail.compact
    assert await store.messages.poll("bob", 0, 5) is None

    await store.loose_ends.todo_upsert("bob", "core", "k", "do it")
    todo = await store.messages.poll("bob", 0, 5)
    assert todo is not None and todo.todos_changed and todo.todo_version == 1
    assert await store.messages.poll("bob", 1, 5) is None

    await store.agents.record_turn("bob", "ok", 0.9, None)
    assert (await store.agents.request_compact("bob", 0.5)).queued
    compact = await store.messages.poll("bob", 1, 5)
    assert compact is not None and compact.compact and not compact.todos_changed


async def test_poll_wakes_only_for_a_net_change_in_open_todos(store: Store) -> None:
    # A todo filed and cleared since the waiter last looked (a bash task that ended
    # inside its turn, a subagent result it already read) must not wake it for nothing.
    await store.loose_ends.todo_upsert("bob", "bash", "t1", "running")
    seen = await store.messages.poll("bob", 0, 5)
    assert seen is not None and seen.todos_changed
    await store.loose_ends.todo_upsert("bob", "bash", "t2", "running")
    await store.loose_ends.todo_upsert("bob", "bash", "t2", "done (exit 0)")
    assert await store.loose_ends.todo_clear("bob", "bash", "t2")
    assert await store.messages.poll("bob", seen.todo_version, 5) is None
    # The one it saw, cleared: still nothing new.
    assert await store.loose_ends.todo_clear("bob", "bash", "t1")
    assert await store.messages.poll("bob", seen.todo_version, 5) is None
    # An update of a todo it saw is a change; so is a new one left open.
    await store.loose_ends.todo_upsert("bob", "bash", "t3", "running")
    first = await store.messages.poll("bob", seen.todo_version, 5)
    assert first is not None and first.todos_changed
    await store.loose_ends.todo_upsert("bob", "bash", "t3", "done (exit 1)")
    updated = await store.messages.poll("bob", first.todo_version, 5)
    assert updated is not None and updated.todos_changed
    assert updated.todo_version > first.todo_version
    # A quiet upsert (the agent's own turn caused it) is listed but wakes no one;
    # a later waking upsert of the same key does.
    await store.loose_ends.todo_upsert("bob", "bash", "t4", "running", wake=False)
    assert await store.messages.poll("bob", updated.todo_version, 5) is None
    assert [t.key for t in (await store.loose_ends.open(["bob"])).todos] == ["t3", "t4"]
    await store.loose_ends.todo_upsert("bob", "bash", "t4", "done (exit 0)")
    finished = await store.messages.poll("bob", updated.todo_version, 5)
    assert finished is not None and finished.todos_changed
    updated = finished
    # Mail still carries the current version, so the waiter can catch up on it.
    await store.messages.send("alice", "bob", "hi")
    mail = await store.messages.poll("bob", seen.todo_version, 5)
    assert mail is not None and mail.todo_version == updated.todo_version


async def test_poll_takes_at_most_its_limit(store: Store) -> None:
    for i in range(7):
        await store.messages.send("alice", "bob", f"m{i}")
    first = await store.messages.poll("bob", 0, 5)
    assert first is not None and len(first.messages) == 5
    rest = await store.messages.poll("bob", 0, 5)
    assert rest is not None and [m.body for m in rest.messages] == ["m5", "m6"]


async def test_changes_are_reported_after_commit_to_subscribers(store: Store) -> None:
    seen: list[str] = []
    unsubscribe = store.on_change(seen.append)
    await store.messages.send("alice", "bob", "x")
    assert seen == ["bob"]  # reported before the caller's await returned
    await store.loose_ends.todo_upsert("carol", "core", "k", "v")
    await store.messages.fence("dan")
    await store.messages.attach("erin")
    assert seen == ["bob", "carol", "dan", "erin"]
    with pytest.raises(NotFound):
        await store.messages.send("alice", "frank", "x", in_reply_to=12345)
    await store.messages.recv("bob", 5)
    await store.messages.ack_until("bob", 10)
    assert seen == ["bob", "carol", "dan", "erin"]  # failed or non-waking ops say nothing
    unsubscribe()
    await store.messages.send("alice", "bob", "y")
    assert seen == ["bob", "carol", "dan", "erin"]


async def test_a_failing_subscriber_does_not_fail_the_write(store: Store) -> None:
    seen: list[str] = []

    def broken(agent: str) -> None:
        raise RuntimeError("subscriber bug")

    store.on_change(broken)
    store.on_change(seen.append)
    msg = await store.messages.send("alice", "bob", "x")
    assert seen == ["bob"]
    assert (await store.messages.get(msg)) is not None


async def test_concurrent_sends_all_land_with_distinct_ids(store: Store) -> None:
    ids: list[int] = []

    async def send(i: int) -> None:
        ids.append(await store.messages.send(f"s{i % 4}", "sink", f"body {i}"))

    async with anyio.create_task_group() as tg:
        for i in range(200):
            tg.start_soon(send, i)
    assert len(set(ids)) == 200
    rows = await store.messages.scan(limit=1000)
    assert sorted(r.id for r in rows) == sorted(ids)
    assert sorted(r.body for r in rows) == sorted(f"body {i}" for i in range(200))


async def test_inbox_outbox_unread_counts_and_scan(store: Store) -> None:
    ids = [await store.messages.send("alice", "op", f"a{i}") for i in range(3)]
    ids.append(await store.messages.send("bob", "op", "b0"))
    await store.messages.send("op", "alice", "reply")
    inbox = await store.messages.inbox("op", limit=2)
    assert [m.body for m in inbox] == ["a2", "b0"]  # the newest two, oldest first
    await store.messages.ack_ids("op", [ids[0]])
    unread = await store.messages.inbox("op", limit=50, unread_only=True)
    assert [m.body for m in unread] == ["a1", "a2", "b0"]
    assert await store.messages.unread_counts("op") == {"alice": 2, "bob": 1}
    assert [m.body for m in await store.messages.outbox("op")] == ["reply"]
    page = await store.messages.scan(after_id=ids[1], limit=2)
    assert [m.id for m in page] == [ids[2], ids[3]]


async def test_thread_is_the_whole_reply_tree(store: Store) -> None:
    root = await store.messages.send("alice", "bob", "root")
    r1 = await store.messages.send("bob", "alice", "r1", in_reply_to=root)
    r2 = await store.messages.send("alice", "bob", "r2", in_reply_to=r1)
    side = await store.messages.send("carol", "bob", "side", in_reply_to=root)
    other = await store.messages.send("alice", "bob", "unrelated")
    for member in (root, r2, side):
        assert [m.id for m in await store.messages.thread(member)] == [root, r1, r2, side]
    assert [m.id for m in await store.messages.thread(other)] == [other]
    assert await store.messages.thread(10_000) == []


async def test_counts_per_name_sent_delivered_and_still_queued(store: Store) -> None:
    assert await store.messages.counts() == []
    for i in range(3):
        await store.messages.send("alice", "bob", f"a{i}")
    await store.messages.send("bob", "alice", "reply")
    last = await store.messages.send("operator", "bob", "hi")
    handed = await store.messages.recv("bob", 2)  # two delivered, none acked
    await store.messages.ack_ids("bob", [handed.messages[0].id])
    assert await store.messages.counts() == [
        MessageCounts("alice", sent=3, delivered=0, queued=1),
        MessageCounts("bob", sent=1, delivered=2, queued=3),
        MessageCounts("operator", sent=1, delivered=0, queued=0),
    ]
    await store.messages.recv("bob", 5)
    await store.messages.ack_until("bob", last)
    counts = {c.agent: c for c in await store.messages.counts()}
    assert counts["bob"] == MessageCounts("bob", sent=1, delivered=4, queued=0)


async def test_page_walks_newest_first_by_time_cursor_and_filters_by_agent(
    store: Store,
) -> None:
    ids = []
    for i in range(5):
        ids.append(await store.messages.send("alice", "bob", f"a{i}"))
        ids.append(await store.messages.send("carol", "dave", f"c{i}"))
    ids.append(await store.messages.send("bob", "alice", "reply", in_reply_to=ids[0]))
    first = await store.messages.page(limit=4)
    assert [m.id for m in first] == sorted(ids, reverse=True)[:4]
    rest = await store.messages.page(before=(first[-1].created_at, first[-1].id), limit=100)
    assert [m.id for m in first + rest] == sorted(ids, reverse=True)
    alice = await store.messages.page(limit=3, agent="alice")
    assert [m.body for m in alice] == ["reply", "a4", "a3"]
    cursor = (alice[-1].created_at, alice[-1].id)
    older = await store.messages.page(before=cursor, limit=10, agent="alice")
    assert [m.body for m in older] == ["a2", "a1", "a0"]
    assert await store.messages.page(agent="nobody") == []
    assert alice[0].in_reply_to == ids[0]


async def test_a_nul_in_a_body_is_stored_intact_or_refused_as_bad_input(backend: Backend) -> None:
    """Never a database failure: SQLite keeps NUL; PostgreSQL text cannot hold it."""
    store = await backend.open()
    try:
        if backend.name == "sqlite":
            sent = await store.messages.send("alice", "bob", "a\x00b")
            row = await store.messages.get(sent)
            assert row is not None and row.body == "a\x00b"
        else:
            with pytest.raises(InvalidRequest, match="NUL"):
                await store.messages.send("alice", "bob", "a\x00b")
            assert await store.messages.scan() == []
    finally:
        await store.close()
