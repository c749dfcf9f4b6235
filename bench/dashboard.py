"""What the front page's timeline costs a big, old hive.

A hive of 100 agents, each taking a one-minute turn every two minutes around
the clock (72,000 turn rows a day in the activity log, as the coordinator
writes them), read and drawn as the front page does: the window's turn rows
through the log's ``(kind, at)`` index, at most ``MARKS`` of them, into lanes
and SVG. The figure is a 24 h window over a week of turns; the floor is the
same window over one day of them: a window costs what it holds (capped), not
what the log holds. The counts are the rows each window reads.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import time
from pathlib import Path

import anyio

from bench.registry import Context, Latency, Row, Sizes, benchmark
from hyperhive.core.dashboard.pictures.timeline import Window, lanes, timeline
from hyperhive.core.dashboard.turns import MARKS, ended_mark, window_rows
from hyperhive.store.sqlite import SqliteStore

__all__ = ["timeline_window"]

EVERY, TOOK = 120.0, 60.0  # a turn every two minutes, each a minute long


def _fill(path: Path, agents: int, days: float, now: float) -> int:
    """Write ``days`` of turn rows, as the coordinator's activity log holds them."""
    rows, links = [], []
    ident = 0
    t = now - days * 86400
    while t < now:
        for a in range(agents):
            ident += 1
            at = t + a * EVERY / agents
            name = f"agent{a:03d}"
            detail = {"outcome": "ok", "run": "turn", "cost_usd": 0.01, "seconds": TOOK}
            rows.append((ident, at, "turn", name, "[]", f"{name}: turn ok", json.dumps(detail)))
            links.append((name, "turn", at, ident))
        t += EVERY
    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO activity(id, at, kind, agent, others, title, detail) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        db.executemany(
            "INSERT INTO activity_agents(agent, kind, at, id) VALUES (?, ?, ?, ?)", links
        )
    db.close()
    return len(rows)


async def _draw(store: SqliteStore, hours: int, now: float) -> tuple[int, int, int]:
    """One repaint: the rows read, the SVG's bytes, the minutes drawn (the rest is cut)."""
    start = now - hours * 3600
    rows, cut = await window_rows(store, start)
    marks = [(r.agent, ended_mark(r)) for r in rows]
    parents: dict[str, str | None] = {}
    svg = timeline(lanes(marks, parents), Window(start, now, dt.UTC, cut, MARKS))
    return len(rows), len(svg.encode()), round((now - (cut or start)) / 60)


async def _time(path: Path, hours: int, now: float, repeats: int) -> list[int]:
    store = await SqliteStore.open(path)
    try:
        await _draw(store, hours, now)  # warm the page cache
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            await _draw(store, hours, now)
            samples.append(time.perf_counter_ns() - t0)
        return samples
    finally:
        await store.close()


async def _counts(path: Path, now: float) -> list[tuple[int, int, int, int]]:
    store = await SqliteStore.open(path)
    try:
        return [(h, *await _draw(store, h, now)) for h in (1, 6, 24)]
    finally:
        await store.close()


def _hive(ctx: Context, agents: int, days: float, now: float) -> Path:
    path = ctx.scratch("dash") / "hive.db"
    anyio.run(_make, path)
    _fill(path, agents, days, now)
    return path


async def _make(path: Path) -> None:
    await (await SqliteStore.open(path)).close()


@benchmark("dashboard.timeline")
def timeline_window(ctx: Context) -> list[Row | Sizes]:
    agents, days, repeats = (10, 2.0, 5) if ctx.quick else (100, 7.0, 30)
    now = time.time()
    week = _hive(ctx, agents, days, now)
    day = _hive(ctx, agents, 1.0, now)
    figure = anyio.run(_time, week, 24, now, repeats)
    floor = anyio.run(_time, day, 24, now, repeats)
    counts = anyio.run(_counts, week, now)
    per_day = int(agents * 86400 / EVERY)
    return [
        Row(
            f"dashboard.timeline: 24 h of {agents} agents, {days:g} days logged",
            Latency.of(figure),
            "one day logged",
            Latency.of(floor),
            "≈ 1×",
            f"{per_day:,} turn rows a day; a window reads at most {MARKS:,} (newest first, "
            "by the log's (kind, at) index) and shades the time before them",
        ),
        Sizes(
            "dashboard.timeline: rows read per window",
            tuple((f"{h} h", n) for h, n, _, _ in counts),
            f"≤ {MARKS:,}",
            unit="count",
        ),
        Sizes(
            "dashboard.timeline: minutes drawn per window",
            tuple((f"{h} h", minutes) for h, _, _, minutes in counts),
            note="at this rate the newest turns the page reads cover this much of the "
            "window; the time before them is shaded",
            unit="count",
        ),
        Sizes(
            "dashboard.timeline: SVG per window",
            tuple((f"{h} h", size) for h, _, size, _ in counts),
            note="turns of one outcome a few pixels apart or less are drawn as one mark",
        ),
    ]
