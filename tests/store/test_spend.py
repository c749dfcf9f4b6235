"""Spend contract: idempotent records, totals and series, overrides and notices, on reopen."""

from __future__ import annotations

import pytest

from hyperhive.runcost import Figures
from hyperhive.store import Store
from hyperhive.store.rows import SpendPoint, SpendRun, SpendTotal
from tests.support.stores import Backend

pytestmark = pytest.mark.anyio

SONNET, HAIKU = "claude-sonnet-4-5", "claude-haiku-4-5"


def _run(
    agent: str,
    key: str,
    at: float,
    usd: float,
    tokens: int = 0,
    session: str | None = None,
    **totals: Figures,
) -> SpendRun:
    """A run whose session reported ``usd`` and these tokens in all; a session of its
    own unless ``session`` names one (then the figures are the session's so far)."""
    figures = totals or {SONNET: Figures(usd, tokens, 2, 3, 4)}
    return SpendRun(agent, key, "turn", at, session or f"s-{key}", figures)


async def test_a_run_recorded_twice_counts_once(store: Store) -> None:
    first, new = await store.spend.record(_run("alice", "t1", 100.0, 0.5, 10))
    assert new and (first.cost_usd, first.tokens, first.session_usd) == (0.5, 19, 0.5)
    # Resent with other figures (it cannot be, but the key decides): what it was counted at.
    again, new = await store.spend.record(_run("alice", "t1", 101.0, 9.0, 999))
    assert not new and again == first
    # The same key of another agent is another run.
    assert (await store.spend.record(_run("bob", "t1", 102.0, 0.25, 1)))[1]
    totals = await store.spend.totals()
    assert totals == {
        "alice": SpendTotal("alice", 0.5, 10 + 2 + 3 + 4, 1),
        "bob": SpendTotal("bob", 0.25, 1 + 2 + 3 + 4, 1),
    }
    [newest, oldest] = await store.spend.entries()
    assert (newest.agent, oldest.agent, oldest.cost_usd, oldest.tokens) == ("bob", "alice", 0.5, 19)
    assert [e.key for e in await store.spend.entries("alice")] == ["t1"]


async def test_runs_of_one_session_count_the_difference_of_its_totals(store: Store) -> None:
    """claude reports a resumed session's totals so far: c, 2c, 3c are three runs of c."""
    c = Figures(0.152475, 50_800, 5)
    owns = []
    for k in (1, 2, 3):
        total = Figures(c.usd * k, c.input_tokens * k, c.output_tokens * k)
        entry, new = await store.spend.record(
            SpendRun("alice", f"turn:{k}", "turn", 100.0 + k, "s1", {SONNET: total})
        )
        assert new and entry.session_id == "s1" and entry.session_usd == total.usd
        owns.append(entry)
    assert [round(e.cost_usd, 9) for e in owns] == [round(c.usd, 9)] * 3
    assert [e.tokens for e in owns] == [c.tokens] * 3
    [alice] = (await store.spend.totals()).values()
    assert round(alice.usd, 9) == round(3 * c.usd, 9) and alice.tokens == 3 * c.tokens
    assert await store.spend.session_totals("alice", "s1") == {
        SONNET: Figures(c.usd * 3, c.input_tokens * 3, c.output_tokens * 3)
    }
    # Another agent's session of the same id is its own.
    bob, _ = await store.spend.record(
        SpendRun("bob", "turn:1", "turn", 110.0, "s1", {SONNET: Figures(1.0, 10)})
    )
    assert bob.cost_usd == 1.0


async def test_a_new_session_a_second_model_a_crash_and_a_restart_of_totals(
    store: Store,
) -> None:
    async def own(key: str, session: str, **totals: Figures) -> Figures:
        entry, _ = await store.spend.record(SpendRun("alice", key, "turn", 1.0, session, totals))
        return entry.figures()

    a = Figures(1.0, 100)
    assert await own("k1", "s1", sonnet=a) == a
    # A run with no result: nothing now, the session's totals stand.
    assert await own("k2", "s1") == Figures()
    assert await store.spend.session_totals("alice", "s1") == {"sonnet": a}
    # A subagent model joins: it counts whole, the first model its difference.
    assert await own("k3", "s1", sonnet=a + a, haiku=Figures(0.25, 7)) == a + Figures(0.25, 7)
    # A new session starts from nothing.
    assert await own("k4", "s2", sonnet=a) == a
    # claude lost s1's totals (lower than before): the run is counted whole.
    assert await own("k5", "s1", sonnet=Figures(0.5, 50)) == Figures(0.5, 50)
    assert await store.spend.session_totals("alice", "s1") == {"sonnet": Figures(0.5, 50)}
    assert await store.spend.session_totals("alice", None) == {}


async def test_totals_since_and_series_buckets(store: Store) -> None:
    for key, at, usd in [("a", 1000.0, 1.0), ("b", 1050.0, 2.0), ("c", 1100.0, 4.0)]:
        await store.spend.record(_run("alice", key, at, usd, 1))
    await store.spend.record(_run("bob", "x", 1199.0, 8.0, 1))
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
    await store.spend.record(_run("alice", "t1", 100.0, 1.25, 7, session="s1"))
    await store.spend.set_overrides("alice", {"usd_total": 3.0})
    await store.close()
    store = await backend.open()
    try:
        assert (await store.spend.totals())["alice"].usd == 1.25
        assert await store.spend.overrides() == {"alice": {"usd_total": 3.0}}
        assert not (await store.spend.record(_run("alice", "t1", 100.0, 1.25, 7)))[1]
        # The session's totals are kept too: its next run counts from them.
        entry, _ = await store.spend.record(_run("alice", "t2", 101.0, 2.0, 9, session="s1"))
        assert (entry.cost_usd, entry.input_tokens) == (0.75, 2)
    finally:
        await store.close()
