"""Spend contract: idempotent records, totals and series, overrides and notices, on reopen."""

from __future__ import annotations

import pytest

from hyperhive.store import Store
from hyperhive.store.rows import SpendEntry, SpendPoint, SpendTotal
from tests.support.stores import Backend

pytestmark = pytest.mark.anyio


def _entry(agent: str, key: str, at: float, usd: float, tokens: int = 0) -> SpendEntry:
    return SpendEntry(
        agent,
        key,
        "turn",
        at,
        usd,
        input_tokens=tokens,
        output_tokens=2,
        cache_read_tokens=3,
        cache_creation_tokens=4,
    )


async def test_a_run_recorded_twice_counts_once(store: Store) -> None:
    assert await store.spend.record(_entry("alice", "t1", 100.0, 0.5, 10))
    assert not await store.spend.record(_entry("alice", "t1", 101.0, 9.0, 999))
    # The same key of another agent is another run.
    assert await store.spend.record(_entry("bob", "t1", 102.0, 0.25, 1))
    totals = await store.spend.totals()
    assert totals == {
        "alice": SpendTotal("alice", 0.5, 10 + 2 + 3 + 4, 1),
        "bob": SpendTotal("bob", 0.25, 1 + 2 + 3 + 4, 1),
    }
    [newest, oldest] = await store.spend.entries()
    assert (newest.agent, oldest.agent, oldest.cost_usd, oldest.tokens) == ("bob", "alice", 0.5, 19)
    assert [e.key for e in await store.spend.entries("alice")] == ["t1"]


async def test_totals_since_and_series_buckets(store: Store) -> None:
    for key, at, usd in [("a", 1000.0, 1.0), ("b", 1050.0, 2.0), ("c", 1100.0, 4.0)]:
        await store.spend.record(_entry("alice", key, at, usd, 1))
    await store.spend.record(_entry("bob", "x", 1199.0, 8.0, 1))
    assert await store.spend.totals(since=1050.0) == {
        "alice": SpendTotal("alice", 6.0, 20, 2),
        "bob": SpendTotal("bob", 8.0, 10, 1),
    }
    assert await store.spend.totals(since=2000.0) == {}
    assert await store.spend.series(since=1000.0, origin=1000.0, bucket=100.0) == [
        SpendPoint("alice", 1000.0, 3.0, 20),
        SpendPoint("alice", 1100.0, 4.0, 10),
        SpendPoint("bob", 1100.0, 8.0, 10),
    ]


async def test_overrides_replace_and_clear(store: Store) -> None:
    assert await store.spend.overrides() == {}
    await store.spend.set_overrides("alice", {"usd_per_day": 5.0, "tokens_total": None})
    await store.spend.set_overrides("*", {"usd_total": 100.0})
    await store.spend.set_overrides("alice", {"usd_per_day": 7.5})
    assert await store.spend.overrides() == {
        "*": {"usd_total": 100.0},
        "alice": {"usd_per_day": 7.5},
    }
    await store.spend.set_overrides("alice", {})
    assert await store.spend.overrides() == {"*": {"usd_total": 100.0}}


async def test_a_notice_is_marked_once(store: Store) -> None:
    assert await store.spend.mark_notice("alice", "usd_per_day=5@2026-12-01")
    assert not await store.spend.mark_notice("alice", "usd_per_day=5@2026-12-01")
    assert await store.spend.mark_notice("alice", "usd_per_day=5@2026-12-02")
    assert await store.spend.mark_notice("*", "usd_per_day=5@2026-12-01")


async def test_spend_and_overrides_survive_a_reopen(backend: Backend) -> None:
    store = await backend.open()
    await store.spend.record(_entry("alice", "t1", 100.0, 1.25, 7))
    await store.spend.set_overrides("alice", {"usd_total": 3.0})
    await store.close()
    store = await backend.open()
    try:
        assert (await store.spend.totals())["alice"].usd == 1.25
        assert await store.spend.overrides() == {"alice": {"usd_total": 3.0}}
        assert not await store.spend.record(_entry("alice", "t1", 100.0, 1.25, 7))
    finally:
        await store.close()
