"""The upgrade that recounts spend rows recorded at claude's session totals.

A database at the schema before it, with rows as the old code wrote them
(each run at its session's total so far; a compaction at the sum of its two
runs' totals), is opened by this hyperhive: the rows come back at their runs'
own cost, computed by hand below, on both backends.
"""

from __future__ import annotations

import json
import logging

import pytest

from hyperhive.runcost import UNKNOWN_MODEL, Figures
from hyperhive.store.rows import SpendRun
from hyperhive.store.sqlite.schema import MIGRATIONS
from hyperhive.store.sqlite.spendfix import schema_15
from tests.support.stores import Backend

pytestmark = pytest.mark.anyio

BEFORE = next(i for i, step in enumerate(MIGRATIONS) if step is schema_15)

# (key, agent, kind, cost as the old code recorded it, the run's own cost, claude's total)
# USD figures are multiples of 1/8: every sum below is exact.
ROWS = [
    # alice's first session: three turns of 0.25 (one crashed: no result, recorded 0) ...
    ("turn:a1", "alice", "turn", 0.25, 0.25, 0.25),
    ("turn:a2", "alice", "turn", 0.5, 0.25, 0.5),
    ("turn:a3", "alice", "turn", 0.0, 0.0, None),
    # ... a compaction: checkpoint 0.125 (total 0.625), /compact 0.25 (total 0.875),
    # recorded as 0.625 + 0.875. Its own share is estimated (0.25 of 0.375) ...
    ("compaction:a4", "alice", "compaction", 1.5, 0.25, 0.75),
    # ... and the turn after it takes the rest: 0.25 + 0.125, so the two sum exactly.
    ("turn:a5", "alice", "turn", 1.125, 0.375, 1.125),
    # A new session (its total is below the last): counted from nothing.
    ("turn:a6", "alice", "turn", 0.25, 0.25, 0.25),
    ("turn:a7", "alice", "turn", 0.5, 0.25, 0.5),
    # A compaction whose /compact reported nothing: the sum of one total, 0.625.
    ("compaction:a8", "alice", "compaction", 0.625, 0.125, 0.625),
    # Subagent rows stay as recorded: one agent's subagents cannot be told apart.
    ("subagent:s1", "alice", "subagent", 0.375, 0.375, 0.375),
    ("subagent:s2", "alice", "subagent", 0.75, 0.75, 0.75),
    ("turn:b1", "bob", "turn", 1.0, 1.0, 1.0),
    ("turn:b2", "bob", "turn", 3.0, 2.0, 3.0),
    ("turn:c1", "carol", "turn", 0.5, 0.5, 0.5),
]


def _feed(agent: str, key: str, usd: float, kind: str = "turn") -> tuple[object, ...]:
    detail = {"outcome": "ok", "run": kind, "cost_usd": usd, "input_tokens": 10}
    title = f"{agent}: {kind} ok · ${usd:.4f}"
    return (1.0, "turn", agent, "[]", title, json.dumps(detail), f"turn:{agent}:{key}")


async def test_old_rows_are_recounted_at_each_runs_own_cost(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    await backend.create_at(BEFORE)
    backend.execute(
        "INSERT INTO spend(agent, key, kind, at, cost_usd, input_tokens, output_tokens, "
        "cache_read_tokens, cache_creation_tokens) VALUES (?, ?, ?, ?, ?, 10, 1, 0, 0)",
        [
            (agent, key, kind, 100.0 + i, old)
            for i, (key, agent, kind, old, _, _) in enumerate(ROWS)
        ],
    )
    backend.execute(
        "INSERT INTO agent_state(name, session_id) VALUES (?, ?)",
        [("alice", "alice-s2"), ("bob", "bob-s1"), ("carol", None)],
    )
    backend.execute(
        "INSERT INTO activity(at, kind, agent, others, title, detail, key) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            _feed("alice", "a2", 0.5),
            _feed("alice", "a4", 1.5, "compaction"),
            _feed("bob", "b1", 1.0),
            _feed("dave", "gone", 7.0),  # its spend row is not there: left alone
        ],
    )
    with caplog.at_level(logging.INFO):
        store = await backend.open()
    try:
        entries = {e.key: e for e in await store.spend.entries(limit=100)}
        assert {k: (e.cost_usd, e.session_usd) for k, e in entries.items()} == {
            key: (own, total) for key, _, _, _, own, total in ROWS
        }
        assert {e.session_id for e in entries.values()} == {None}
        totals = await store.spend.totals()
        assert {a: t.usd for a, t in totals.items()} == {
            "alice": 2.875,
            "bob": 3.0,
            "carol": 0.5,
        }
        # The feed tells the same figures.
        feed = {r.title: r.detail for r in await store.activity.page(kind="turn")}
        assert set(feed) == {
            "alice: turn ok · $0.2500",
            "alice: compaction ok · $0.2500",
            "bob: turn ok · $1.0000",
            "dave: turn ok · $7.0000",
        }
        assert feed["alice: turn ok · $0.2500"]["cost_usd"] == 0.25
        assert feed["alice: compaction ok · $0.2500"]["input_tokens"] == 10
        # Each agent's current session keeps its last total, so its next run counts from it.
        assert await store.spend.session_totals("alice", "alice-s2") == {
            UNKNOWN_MODEL: Figures(0.625)
        }
        assert await store.spend.session_totals("bob", "bob-s1") == {UNKNOWN_MODEL: Figures(3.0)}
        after, new = await store.spend.record(
            SpendRun(
                "alice", "turn:next", "turn", 200.0, "alice-s2", {"sonnet": Figures(0.875, 700)}
            )
        )
        assert new and after.cost_usd == 0.25 and after.input_tokens == 200
    finally:
        await store.close()
    assert (
        "spend repair: 6 of 13 spend rows recounted at their run's own cost (2 feed rows with "
        "them), 2 current sessions' totals kept; 2 subagent rows left as recorded"
    ) in caplog.text


async def test_an_empty_hive_upgrades_quietly(backend: Backend) -> None:
    await backend.create_at(BEFORE)
    store = await backend.open()
    try:
        assert await store.spend.totals() == {}
        entry, _ = await store.spend.record(
            SpendRun("alice", "turn:1", "turn", 1.0, "s", {"sonnet": Figures(0.5, 5)})
        )
        assert entry.cost_usd == 0.5 and entry.session_usd == 0.5
    finally:
        await store.close()
