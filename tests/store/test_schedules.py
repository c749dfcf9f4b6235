"""Due firing contract: reminders and schedules become messages exactly once."""

from __future__ import annotations

import pytest

from hyperhive.store import Store
from hyperhive.store.rows import FireReminder, FireSchedule

pytestmark = pytest.mark.anyio


async def test_due_reads_only_what_is_due_and_the_next_time(store: Store) -> None:
    assert (await store.schedules.due(100.0)).next_due is None
    early = await store.loose_ends.remind("bob", "early", 10.0, max_pending=5)
    await store.loose_ends.remind("bob", "late", 500.0, max_pending=5)
    sched = await store.schedules.add("alice", "carol", "tick", 60.0, None, 50.0)
    await store.schedules.add("alice", "carol", "later", None, "0 * * * *", 300.0)
    due = await store.schedules.due(100.0)
    assert [r.id for r in due.reminders] == [early]
    assert [s.id for s in due.schedules] == [sched]
    assert due.next_due == 10.0
    assert await store.messages.scan() == []  # reading fired nothing


async def test_fire_delivers_marks_and_wakes_in_one_step(store: Store) -> None:
    seen: list[str] = []
    store.on_change(seen.append)
    rid = await store.loose_ends.remind("bob", "r", 10.0, max_pending=5)
    sid = await store.schedules.add("alice", "carol", "tick", 60.0, None, 50.0)
    fired = await store.schedules.fire(
        100.0,
        "reminder",
        [FireReminder(rid, "[reminder] r")],
        [FireSchedule(sid, "[scheduled] tick", was_next_at=50.0, next_at=110.0)],
    )
    assert set(fired.delivered) == {"bob", "carol"}
    assert fired.next_due == 110.0
    assert sorted(seen) == ["bob", "carol"]
    [to_bob] = (await store.messages.recv("bob", 5)).messages
    assert (to_bob.sender, to_bob.body, to_bob.id) == (
        "reminder",
        "[reminder] r",
        fired.delivered["bob"][0],
    )
    [to_carol] = (await store.messages.recv("carol", 5)).messages
    assert to_carol.body == "[scheduled] tick"
    [schedule] = await store.schedules.for_agents(["carol"])
    assert schedule.next_at == 110.0
    due = await store.schedules.due(100.0)
    assert due.reminders == () and due.schedules == ()


async def test_fire_skips_what_changed_since_it_was_read(store: Store) -> None:
    rid = await store.loose_ends.remind("bob", "r", 10.0, max_pending=5)
    cancelled = await store.loose_ends.remind("bob", "gone", 10.0, max_pending=5)
    sid = await store.schedules.add("alice", "carol", "tick", 60.0, None, 50.0)
    gone = await store.schedules.add("alice", "carol", "gone", 60.0, None, 50.0)
    await store.loose_ends.cancel("reminder", cancelled)
    await store.loose_ends.cancel("schedule", gone)
    reminders = [FireReminder(rid, "r"), FireReminder(cancelled, "gone")]
    schedules = [
        FireSchedule(sid, "tick", was_next_at=50.0, next_at=110.0),
        FireSchedule(gone, "gone", was_next_at=50.0, next_at=110.0),
    ]
    first = await store.schedules.fire(100.0, "reminder", reminders, schedules)
    assert {a: len(ids) for a, ids in first.delivered.items()} == {"bob": 1, "carol": 1}
    # A second firer that read the same due rows delivers nothing again.
    second = await store.schedules.fire(100.0, "reminder", reminders, schedules)
    assert second.delivered == {}
    assert [m.body for m in await store.messages.scan()] == ["r", "tick"]


async def test_for_agents_sees_owner_or_target_and_not_cancelled(store: Store) -> None:
    a = await store.schedules.add("alice", "bob", "p1", 60.0, None, 1.0)
    b = await store.schedules.add("carol", "alice", "p2", None, "*/5 * * * *", 2.0)
    c = await store.schedules.add("carol", "dan", "p3", 60.0, None, 3.0)
    await store.loose_ends.cancel("schedule", b)
    assert [s.id for s in await store.schedules.for_agents(["alice"])] == [a]
    assert [s.id for s in await store.schedules.for_agents(["dan", "bob"])] == [a, c]
    assert await store.schedules.for_agents([]) == []
    [p3] = await store.schedules.for_agents(["dan"])
    assert (p3.owner, p3.target, p3.every_seconds, p3.cron) == ("carol", "dan", 60.0, None)
