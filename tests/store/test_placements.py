"""Agent → host assignments and moves contract, on both backends."""

from __future__ import annotations

import pytest

from hyperhive.errors import Conflict, NotFound
from hyperhive.store import Store
from tests.support.stores import Backend

pytestmark = pytest.mark.anyio


async def test_assign_replaces_and_keeps_the_pin(store: Store) -> None:
    assert await store.placements.get("a") is None
    first = await store.placements.assign("a", "h1", pinned=False)
    assert (first.host, first.pinned, first.move_id) == ("h1", False, None)
    pinned = await store.placements.assign("a", "h2", pinned=True)
    assert (pinned.host, pinned.pinned) == ("h2", True)
    await store.placements.assign("b", "h1", pinned=False)
    assert [(p.agent, p.host) for p in await store.placements.all()] == [("a", "h2"), ("b", "h1")]
    assert await store.placements.per_host() == {"h1": 1, "h2": 1}
    await store.placements.assign("c", "h1", pinned=False)
    assert await store.placements.per_host() == {"h1": 2, "h2": 1}
    await store.placements.forget("a")
    assert await store.placements.get("a") is None
    assert await store.placements.per_host() == {"h1": 2}


async def test_a_move_is_undone_before_commit_and_switches_host_at_commit(store: Store) -> None:
    with pytest.raises(NotFound, match="start it first"):
        await store.placements.begin_move("a", "m0", "h2")
    await store.placements.assign("a", "h1", pinned=True)
    moving = await store.placements.begin_move("a", "m1", "h2")
    assert (moving.host, moving.move_from, moving.move_to, moving.move_phase) == (
        "h1",
        "h1",
        "h2",
        "draining",
    )
    with pytest.raises(Conflict, match="already moving"):
        await store.placements.begin_move("a", "m2", "h3")
    await store.placements.move_phase("a", "m1", "copying")
    with pytest.raises(NotFound):
        await store.placements.move_phase("a", "stale", "copying")
    # Undone: the agent still belongs on its source.
    await store.placements.end_move("a", "m1")
    undone = await store.placements.get("a")
    assert undone is not None and (undone.host, undone.move_id) == ("h1", None)

    await store.placements.begin_move("a", "m3", "h2")
    with pytest.raises(NotFound):
        await store.placements.commit_move("a", "m1")
    committed = await store.placements.commit_move("a", "m3")
    assert (committed.host, committed.pinned, committed.move_phase) == ("h2", True, "cleanup")
    assert committed.move_from == "h1"
    await store.placements.end_move("a", "m3")
    done = await store.placements.get("a")
    assert done is not None and (done.host, done.move_phase, done.move_from) == ("h2", None, None)


async def test_assignment_and_move_phase_survive_reopen(backend: Backend) -> None:
    store = await backend.open()
    try:
        await store.placements.assign("a", "h1", pinned=False)
        await store.placements.begin_move("a", "m1", "h2")
        await store.placements.move_phase("a", "m1", "copying")
    finally:
        await store.close()
    store = await backend.open()
    try:
        row = await store.placements.get("a")
        assert row is not None
        assert (row.host, row.move_id, row.move_to, row.move_phase) == ("h1", "m1", "h2", "copying")
    finally:
        await store.close()
