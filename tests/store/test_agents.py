"""Agent state contract: defaults, turns, compaction, desired running state."""

from __future__ import annotations

import pytest

from hyperhive.store import Store
from hyperhive.store.rows import AgentState

pytestmark = pytest.mark.anyio


async def test_a_fresh_agent_reads_as_defaults(store: Store) -> None:
    assert await store.agents.get("bob") == AgentState(name="bob")
    await store.agents.ensure(["carol", "alice", "bob"])
    assert [a.name for a in await store.agents.all()] == ["alice", "bob", "carol"]


async def test_status_round_trips_and_clears(store: Store) -> None:
    await store.agents.set_status("bob", "busy", 123.0)
    got = await store.agents.get("bob")
    assert (got.status_text, got.status_set_at) == ("busy", 123.0)
    await store.agents.set_status("bob", "", None)
    got = await store.agents.get("bob")
    assert (got.status_text, got.status_set_at) == ("", None)


async def test_record_turn_acks_keeps_old_values_and_reports_the_previous_state(
    store: Store,
) -> None:
    handled = await store.messages.send("alice", "bob", "handled")
    kept = await store.messages.send("alice", "bob", "not handled")
    await store.messages.recv("bob", 5)
    first = await store.agents.record_turn("bob", "needs_login", 0.4, "s1", ack=[handled])
    assert first.was_needs_login is False
    state = await store.agents.get("bob")
    assert state.needs_login and state.session_id == "s1" and state.last_context_usage == 0.4
    assert state.last_outcome == "needs_login" and state.last_turn_at is not None

    second = await store.agents.record_turn("bob", "ok", None, None)
    assert second.was_needs_login is True
    state = await store.agents.get("bob")
    assert not state.needs_login
    assert (state.session_id, state.last_context_usage) == ("s1", 0.4)  # None keeps them
    await store.messages.attach("bob")
    assert [m.id for m in (await store.messages.recv("bob", 5)).messages] == [kept]


async def test_compact_only_above_the_threshold_and_cleared_by_a_turn(store: Store) -> None:
    unknown = await store.agents.request_compact("bob", 0.5)
    assert unknown.queued is False and unknown.usage is None
    await store.agents.record_turn("bob", "ok", 0.5, None)
    assert (await store.agents.request_compact("bob", 0.5)).queued is False
    assert not (await store.agents.get("bob")).compact_pending
    await store.agents.record_turn("bob", "ok", 0.8, None)
    queued = await store.agents.request_compact("bob", 0.5)
    assert queued.queued and queued.usage == 0.8
    assert (await store.agents.get("bob")).compact_pending
    turn = await store.agents.record_turn("bob", "ok", 0.2, None)
    assert turn.compact_pending
    assert not (await store.agents.get("bob")).compact_pending


async def test_an_ungated_compact_is_queued_at_any_usage(store: Store) -> None:
    unknown = await store.agents.request_compact("carol", None)  # no turn recorded yet
    assert unknown.queued is True and unknown.usage is None
    assert (await store.agents.get("carol")).compact_pending
    await store.agents.record_turn("carol", "ok", 0.1, None)
    low = await store.agents.request_compact("carol", None)
    assert low.queued is True and low.usage == 0.1


async def test_desired_running_and_delete(store: Store) -> None:
    await store.agents.ensure(["alice", "bob"])
    assert await store.agents.desired_running() == {"alice", "bob"}
    await store.agents.set_desired("bob", False)
    assert await store.agents.desired_running() == {"alice"}
    await store.agents.set_status("alice", "x", 1.0)
    assert await store.agents.delete("alice") is True
    assert await store.agents.delete("alice") is False
    assert await store.agents.get("alice") == AgentState(name="alice")


async def test_versions_recorded_at_start_and_needs_update_marked_once_until_the_next_start(
    store: Store,
) -> None:
    assert await store.agents.record_started("bob", "0.1.0", "2.1.328") is None
    got = await store.agents.get("bob")
    assert (got.started_hive, got.started_claude, got.needs_update) == ("0.1.0", "2.1.328", None)
    assert await store.agents.mark_needs_update("bob", "claude 2.1.328 → 9.9.9") is True
    # Marked already: a second report changes nothing and says so (its manager was told).
    assert await store.agents.mark_needs_update("bob", "claude 2.1.328 → 9.9.10") is False
    assert (await store.agents.get("bob")).needs_update == "claude 2.1.328 → 9.9.9"
    assert [a.needs_update for a in await store.agents.all()] == ["claude 2.1.328 → 9.9.9"]
    # The next start records what it runs now and clears the mark, saying what it was.
    was = await store.agents.record_started("bob", "0.1.0", "9.9.9")
    assert was == "claude 2.1.328 → 9.9.9"
    got = await store.agents.get("bob")
    assert (got.started_claude, got.needs_update) == ("9.9.9", None)
    # A claude that did not say its version is kept as unknown.
    await store.agents.record_started("carol", "0.1.0", None)
    assert (await store.agents.get("carol")).started_claude is None
