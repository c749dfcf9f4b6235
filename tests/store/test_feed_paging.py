"""The feed over a real store: pages across messages and the activity log, by any
filter, cover every item once, newest first, however the times tie."""

from __future__ import annotations

import pytest

from hyperhive.core.state.feed import KINDS, Cursor, feed_page
from hyperhive.store import Store

pytestmark = pytest.mark.anyio


async def _walk(store: Store, limit: int, **filters: str) -> list[Cursor]:
    seen: list[Cursor] = []
    before = None
    while True:
        page = await feed_page(store, limit=limit, before=before, **filters)  # type: ignore[arg-type]
        seen += [i.cursor for i in page.items]
        if page.older is None:
            return seen
        assert page.older == page.items[-1].cursor
        before = page.older


async def test_pages_cover_every_kind_once_newest_first(store: Store) -> None:
    sent = []
    for i in range(6):
        mid = await store.messages.send("alice" if i % 2 else "bob", "carol", f"m{i}")
        row = await store.messages.get(mid)
        assert row is not None
        sent.append(row)
        # An event at exactly the message's time, and one between messages.
        await store.activity.record("turn", "alice", f"t{i}", at=row.created_at)
        await store.activity.record(
            "bash", "bob", f"b{i}", others=["carol"], at=row.created_at + 1e-4
        )
    everything = await _walk(store, 100)
    assert len(everything) == 18 and everything == sorted(everything, reverse=True)
    for limit in (1, 2, 5, 7):
        assert await _walk(store, limit) == everything
    # Filters page the same way: exactly the matching items, once each.
    alice = await _walk(store, 2, agent="alice")
    assert len(alice) == 3 + 6  # messages alice sent, her turns
    assert len(await _walk(store, 4, agent="carol")) == 6 + 6  # mail to her, bash naming her
    assert len(await _walk(store, 3, kind="bash")) == 6
    assert len(await _walk(store, 3, kind="message")) == 6
    assert len(await _walk(store, 2, agent="bob", kind="turn")) == 0
    assert set(KINDS) >= {"message", "turn", "bash", "subagent", "spawn", "crash", "budget"}
