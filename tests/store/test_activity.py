"""Activity log contract: keyed records, paging by (at, id) with agent and kind, pruning."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from hyperhive.core.dashboard.turns import window_rows
from hyperhive.store import Store
from hyperhive.store.rows import ActivityRow
from hyperhive.store.sqlite import SqliteStore
from hyperhive.store.sqlite.schema import MIGRATIONS

pytestmark = pytest.mark.anyio


async def test_a_keyed_event_lands_once_and_reads_back_whole(store: Store) -> None:
    row = await store.activity.record(
        "turn",
        "alice",
        "alice: turn ok ($0.0123)",
        others=["bob", "alice", "bob"],
        detail={"cost_usd": 0.0123, "tokens": 42},
        key="turn:alice:r1",
        at=100.0,
    )
    assert row is not None
    assert await store.activity.record("turn", "alice", "again", key="turn:alice:r1") is None
    [read] = await store.activity.page()
    assert read == ActivityRow(
        row.id,
        100.0,
        "turn",
        "alice",
        ("bob",),
        "alice: turn ok ($0.0123)",
        {"cost_usd": 0.0123, "tokens": 42},
    )
    # Unkeyed events never collide.
    assert await store.activity.record("spawn", "carol", "spawned") is not None
    assert await store.activity.record("spawn", "carol", "spawned") is not None
    assert len(await store.activity.page()) == 3


async def test_pages_are_newest_first_strictly_before_the_cursor(store: Store) -> None:
    # Two events share a time: the id breaks the tie, so paging neither skips nor repeats.
    times = [10.0, 20.0, 20.0, 30.0, 40.0, 50.0]
    for i, at in enumerate(times):
        await store.activity.record("bash", f"a{i % 2}", f"e{i}", at=at)
    seen: list[str] = []
    cursor = None
    while True:
        page = await store.activity.page(cursor, limit=2)
        if not page:
            break
        seen += [r.title for r in page]
        cursor = (page[-1].at, page[-1].id)
    assert seen == ["e5", "e4", "e3", "e2", "e1", "e0"]


async def test_agent_filter_matches_actor_or_other_and_kind_filter_narrows(store: Store) -> None:
    await store.activity.record("spawn", "boss", "boss spawned kid", others=["kid"], at=1.0)
    await store.activity.record("turn", "kid", "kid turn", at=2.0)
    await store.activity.record("turn", "other", "other turn", at=3.0)
    await store.activity.record("crash", "kid", "kid crashed", at=4.0)
    kid = await store.activity.page(agent="kid")
    assert [r.title for r in kid] == ["kid crashed", "kid turn", "boss spawned kid"]
    assert [r.title for r in await store.activity.page(agent="kid", kind="turn")] == ["kid turn"]
    turns = await store.activity.page(kind="turn")
    assert [r.title for r in turns] == ["other turn", "kid turn"]
    older = await store.activity.page((kid[1].at, kid[1].id), agent="kid")
    assert [r.title for r in older] == ["boss spawned kid"]
    assert await store.activity.page(agent="nobody") == []


async def test_a_window_since_a_time_holds_its_rows_only_newest_first(store: Store) -> None:
    """The front page's timeline reads one window: the turns at or after its start."""
    for at, kind, agent in [
        (10.0, "turn", "alice"),
        (20.0, "turn", "bob"),
        (30.0, "spawn", "alice"),
        (30.0, "turn", "alice"),
        (40.0, "turn", "bob"),
        (50.0, "turn", "alice"),
    ]:
        await store.activity.record(kind, agent, f"{agent}@{at:g}", at=at)
    turns = await store.activity.page(kind="turn", since=30.0)
    assert [r.title for r in turns] == ["alice@50", "bob@40", "alice@30"]
    # The bound is inclusive, and combines with the agent, the limit and a cursor.
    assert [r.title for r in await store.activity.page(agent="alice", kind="turn", since=30.0)] == [
        "alice@50",
        "alice@30",
    ]
    assert [r.title for r in await store.activity.page(kind="turn", since=20.0, limit=2)] == [
        "alice@50",
        "bob@40",
    ]
    older = await store.activity.page((turns[1].at, turns[1].id), kind="turn", since=20.0)
    assert [r.title for r in older] == ["alice@30", "bob@20"]
    assert await store.activity.page(kind="turn", since=50.5) == []
    assert len(await store.activity.page(since=0.0)) == 6


async def test_the_timeline_reads_at_most_its_limit_and_says_where_it_cut(store: Store) -> None:
    for at in (5.0, 10.0, 20.0, 30.0, 40.0):
        await store.activity.record("turn", "alice", f"t{at:g}", at=at)
    await store.activity.record("spawn", "alice", "not a turn", at=35.0)
    rows, cut = await window_rows(store, 10.0, limit=3)
    assert [r.title for r in rows] == ["t40", "t30", "t20"] and cut == 20.0
    rows, cut = await window_rows(store, 10.0, limit=4)
    assert [r.title for r in rows] == ["t40", "t30", "t20", "t10"] and cut is None
    assert await window_rows(store, 10.0, agent="bob") == ([], None)


async def test_prune_drops_old_events_from_every_view(store: Store) -> None:
    for at in (1.0, 2.0, 3.0, 4.0):
        await store.activity.record("turn", "alice", f"t{at}", others=["bob"], at=at)
    assert await store.activity.prune(3.0) == 2
    assert [r.title for r in await store.activity.page()] == ["t4.0", "t3.0"]
    assert [r.title for r in await store.activity.page(agent="bob")] == ["t4.0", "t3.0"]
    assert await store.activity.prune(3.0) == 0


def _plans(db: sqlite3.Connection, statements: list[str]) -> list[str]:
    return [
        " | ".join(str(r[3]) for r in db.execute("EXPLAIN QUERY PLAN " + sql).fetchall())
        for sql in statements
    ]


async def test_the_feeds_page_queries_walk_an_index_never_the_table(tmp_path: Path) -> None:
    """What keeps a million messages fast: every page query the feed makes is an
    index walk that stops at its LIMIT, with no sort of the whole table. The SQL is
    the store's own, captured as it runs, then explained."""
    path = tmp_path / "hive.db"
    store = await SqliteStore.open(path)
    try:
        for i in range(50):
            await store.messages.send("alice", "bob", f"m{i}")
            await store.activity.record("turn", "alice", f"t{i}", others=["bob"])
        statements: list[str] = []
        conn = store.engine._conn  # the writer's connection: where the store's SQL runs
        conn.set_trace_callback(statements.append)
        try:
            cursor = (1e12, 10)
            await store.messages.page(cursor, limit=50)
            await store.messages.page(cursor, limit=50, agent="bob")
            await store.activity.page(cursor, limit=50)
            await store.activity.page(cursor, limit=50, agent="bob")
            await store.activity.page(cursor, limit=50, kind="turn")
            await store.activity.page(cursor, limit=50, agent="bob", kind="turn")
            # The timeline's window: stops at its start, whatever the log holds before it.
            await store.activity.page(cursor, limit=50, kind="turn", since=1.0)
            await store.activity.page(cursor, limit=50, agent="bob", kind="turn", since=1.0)
        finally:
            conn.set_trace_callback(None)
    finally:
        await store.close()
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert len(selects) == 8
    with sqlite3.connect(path) as db:
        plans = _plans(db, selects)
    for sql, plan in zip(selects, plans, strict=True):
        steps = plan.split(" | ")
        for i, step in enumerate(steps):
            table = step.split()[1] if step.startswith(("SCAN", "SEARCH")) else None
            if table is not None and not table.startswith("("):  # a table, not a subquery
                # By an index (or a rowid lookup per row found), never a scan of the table.
                assert "INDEX" in step or "PRIMARY KEY" in step, (sql, plan)
            if "TEMP B-TREE" in step:
                # Only the output of a LIMITed walk (sent, received: merged) is sorted.
                assert steps[i - 1].startswith("SCAN (subquery"), (sql, plan)


async def test_upgrading_copies_the_approvals_already_asked_and_resolved(tmp_path: Path) -> None:
    """A hive from before the activity log keeps its approvals' history in the feed."""
    path = tmp_path / "hive.db"
    feed = next(i for i, sql in enumerate(MIGRATIONS) if "CREATE TABLE activity (" in sql)
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
        )
        for version, sql in enumerate(MIGRATIONS[:feed], start=1):
            for statement in sql.split(";\n"):
                db.execute(statement)
            db.execute("INSERT INTO schema_migrations VALUES (?, 0)", (version,))
        db.execute(
            "INSERT INTO approvals(kind, requester, subject, state, created_at, resolved_at, "
            "resolution) VALUES ('init_config', 'queen', 'scout', 'denied', 10.0, 20.0, 'no')"
        )
        db.execute(
            "INSERT INTO approvals(kind, requester, subject, created_at) "
            "VALUES ('init_config', 'queen', 'gina', 30.0)"
        )
    db.close()
    store = await SqliteStore.open(path)
    try:
        rows = await store.activity.page()
        assert [(r.at, r.kind, r.agent, r.others, r.detail["state"]) for r in rows] == [
            (30.0, "approval", "queen", ("gina",), "asked"),
            (20.0, "approval", "scout", ("queen",), "denied"),
            (10.0, "approval", "queen", ("scout",), "asked"),
        ]
        assert rows[1].title == "approval #1 denied: init_config for scout"
        assert rows[1].detail["resolution"] == "no"
        assert [r.at for r in await store.activity.page(agent="scout")] == [20.0, 10.0]
    finally:
        await store.close()
