"""Loose-ends contract: reminders, todos, questions, approvals, the view and cancel rules."""

from __future__ import annotations

import pytest

from hyperhive.errors import Conflict, LimitExceeded, NotFound
from hyperhive.store import Store
from hyperhive.store.rows import (
    ApprovalRow,
    FireReminder,
    QuestionRow,
    ReminderRow,
    TodoRow,
)

pytestmark = pytest.mark.anyio


async def test_reminders_stop_at_the_limit_and_cancelled_ones_free_a_slot(store: Store) -> None:
    first = await store.loose_ends.remind("bob", "one", 100.0, max_pending=2)
    await store.loose_ends.remind("bob", "two", 50.0, max_pending=2)
    with pytest.raises(LimitExceeded, match="2 pending reminders"):
        await store.loose_ends.remind("bob", "three", 10.0, max_pending=2)
    await store.loose_ends.remind("carol", "other agent", 10.0, max_pending=2)
    assert await store.loose_ends.cancel("reminder", first)
    assert not await store.loose_ends.cancel("reminder", first)
    await store.loose_ends.remind("bob", "three", 10.0, max_pending=2)
    open_ = await store.loose_ends.open(["bob"])
    assert [r.message for r in open_.reminders] == ["three", "two"]  # by due time


async def test_todo_upsert_bumps_the_version_and_keeps_its_id(store: Store) -> None:
    a = await store.loose_ends.todo_upsert("bob", "bash", "t1", "first")
    assert (await store.agents.get("bob")).todo_version == 1
    again = await store.loose_ends.todo_upsert("bob", "bash", "t1", "second")
    assert again == a
    assert (await store.agents.get("bob")).todo_version == 2
    row = await store.loose_ends.get("todo", a)
    assert isinstance(row, TodoRow) and row.body == "second" and row.key == "t1"
    woken: list[str] = []
    store.on_change(woken.append)
    assert await store.loose_ends.todo_clear("bob", "bash", "t1")
    assert not await store.loose_ends.todo_clear("bob", "bash", "t1")
    assert await store.loose_ends.get("todo", a) is None
    # Clearing is no net change for a waiter: no bump, no wake (both backends alike).
    assert (await store.agents.get("bob")).todo_version == 2
    assert woken == []


async def test_ask_and_answer_are_each_one_step(store: Store) -> None:
    seen: list[str] = []
    store.on_change(seen.append)
    qid, mid = await store.loose_ends.ask("bob", "may I?", "operator", "[question] may I?")
    assert seen == ["operator"]
    [msg] = await store.messages.inbox("operator")
    assert (msg.id, msg.sender, msg.body) == (mid, "bob", "[question] may I?")
    [q] = await store.loose_ends.questions()
    assert (q.id, q.asker, q.message_id, q.state) == (qid, "bob", mid, "open")

    answered, reply = await store.loose_ends.answer(qid, "yes", "operator")
    assert seen == ["operator", "bob"]
    assert answered.state == "answered" and answered.answer == "yes"
    got = await store.messages.get(reply)
    assert got is not None and got.in_reply_to == mid and got.recipient == "bob"
    assert await store.loose_ends.questions() == []
    assert [x.id for x in await store.loose_ends.questions(open_only=False)] == [qid]

    with pytest.raises(Conflict, match="already answered"):
        await store.loose_ends.answer(qid, "again", "operator")
    with pytest.raises(NotFound, match="#404"):
        await store.loose_ends.answer(404, "x", "operator")
    assert len(await store.messages.scan()) == 2  # refused answers sent nothing


async def test_approvals_resolve_once(store: Store) -> None:
    aid = await store.approvals.create("apply_config", "bob", "carol", {"agent": "carol", "n": 1})
    got = await store.approvals.get(aid)
    assert isinstance(got, ApprovalRow)
    assert (got.kind, got.requester, got.subject, got.state) == (
        "apply_config",
        "bob",
        "carol",
        "pending",
    )
    assert dict(got.payload) == {"agent": "carol", "n": 1}
    assert await store.approvals.pending_for("apply_config", "carol") == aid
    assert await store.approvals.pending_for("apply_config", "dan") is None
    done = await store.approvals.resolve(aid, "approved", "fine")
    assert (done.state, done.resolution) == ("approved", "fine") and done.resolved_at
    with pytest.raises(Conflict, match="already approved"):
        await store.approvals.resolve(aid, "denied", "")
    with pytest.raises(NotFound):
        await store.approvals.resolve(999, "denied", "")
    assert await store.approvals.list() == []
    assert [a.id for a in await store.approvals.list(pending_only=False)] == [aid]
    assert await store.approvals.pending_for("apply_config", "carol") is None


async def test_cancel_rules_per_kind(store: Store) -> None:
    reminder = await store.loose_ends.remind("bob", "r", 1.0, max_pending=5)
    todo = await store.loose_ends.todo_upsert("bob", "s", "k", "t")
    approval = await store.approvals.create("k", "bob", "subj", {})
    question, _ = await store.loose_ends.ask("bob", "q", "operator", "q")
    schedule = await store.schedules.add("alice", "bob", "p", 60.0, None, 10.0)

    for kind, row_id in [
        ("reminder", reminder),
        ("todo", todo),
        ("approval", approval),
        ("question", question),
        ("schedule", schedule),
    ]:
        assert await store.loose_ends.cancel(kind, row_id), kind  # type: ignore[arg-type]
        assert not await store.loose_ends.cancel(kind, row_id), kind  # type: ignore[arg-type]
        assert not await store.loose_ends.cancel(kind, 10_000), kind  # type: ignore[arg-type]

    # Deleted kinds are gone; the others stay readable, marked cancelled.
    assert await store.loose_ends.get("reminder", reminder) is None
    assert await store.loose_ends.get("todo", todo) is None
    a = await store.loose_ends.get("approval", approval)
    assert isinstance(a, ApprovalRow) and a.state == "cancelled"
    q = await store.loose_ends.get("question", question)
    assert isinstance(q, QuestionRow) and q.state == "cancelled"
    s = await store.loose_ends.get("schedule", schedule)
    assert s is not None and getattr(s, "cancelled_at", None) is not None
    assert await store.loose_ends.open() == type(await store.loose_ends.open())()


async def test_a_fired_reminder_cannot_be_cancelled(store: Store) -> None:
    rid = await store.loose_ends.remind("bob", "r", 1.0, max_pending=5)
    due = await store.schedules.due(2.0)
    await store.schedules.fire(2.0, "reminder", [], [])  # nothing chosen: nothing fired
    assert [r.id for r in due.reminders] == [rid]
    await store.schedules.fire(2.0, "reminder", [FireReminder(rid, "body")], [])
    assert not await store.loose_ends.cancel("reminder", rid)
    row = await store.loose_ends.get("reminder", rid)
    assert isinstance(row, ReminderRow) and row.fired_at == 2.0


async def test_the_open_view_filters_by_each_kinds_agent(store: Store) -> None:
    await store.loose_ends.remind("bob", "bob's reminder", 5.0, max_pending=5)
    await store.loose_ends.todo_upsert("carol", "s", "k", "carol's todo")
    await store.approvals.create("k", "bob", "subj", {})
    await store.loose_ends.ask("carol", "carol asks", "operator", "q")
    await store.schedules.add("carol", "bob", "for bob, owned by carol", 60.0, None, 9.0)

    bob = await store.loose_ends.open(["bob"])
    assert [r.message for r in bob.reminders] == ["bob's reminder"]
    assert bob.todos == () and bob.questions == ()
    assert [a.requester for a in bob.approvals] == ["bob"]
    assert [s.prompt for s in bob.schedules] == ["for bob, owned by carol"]  # by target

    carol = await store.loose_ends.open(["carol"])
    assert [t.body for t in carol.todos] == ["carol's todo"]
    assert [q.question for q in carol.questions] == ["carol asks"]
    assert carol.reminders == () and carol.approvals == () and carol.schedules == ()

    everyone = await store.loose_ends.open(None)
    sizes = [len(everyone.reminders), len(everyone.todos), len(everyone.approvals)]
    assert sizes + [len(everyone.questions), len(everyone.schedules)] == [1, 1, 1, 1, 1]
    assert await store.loose_ends.open([]) == type(bob)()


async def test_the_read_api_lists_every_row_fired_and_cancelled_included(store: Store) -> None:
    fired = await store.loose_ends.remind("bob", "fired", 1.0, max_pending=5)
    waiting = await store.loose_ends.remind("carol", "waiting", 500.0, max_pending=5)
    await store.schedules.fire(2.0, "reminder", [FireReminder(fired, "x")], [])
    assert [r.id for r in await store.loose_ends.reminders()] == [waiting]
    assert [r.id for r in await store.loose_ends.reminders(include_fired=True)] == [fired, waiting]

    await store.loose_ends.todo_upsert("bob", "s", "a", "1")
    await store.loose_ends.todo_upsert("carol", "s", "b", "2")
    assert [t.key for t in await store.loose_ends.todos()] == ["a", "b"]
    assert [t.key for t in await store.loose_ends.todos("carol")] == ["b"]

    kept = await store.schedules.add("a", "b", "kept", 60.0, None, 5.0)
    gone = await store.schedules.add("a", "b", "gone", 60.0, None, 5.0)
    await store.loose_ends.cancel("schedule", gone)
    assert [s.id for s in await store.schedules.all()] == [kept, gone]
