"""The front page's timeline, read: turns from the activity log, running ones from the host link.

The coordinator keeps a row per claude run in the activity log (written at its
``turn_end``: outcome, cost, and how long claude ran), kept as long as the
feed. A window reads at most :data:`MARKS` of them, newest first, through the
log's ``(kind, at)`` index, so a hive of any size and age costs the page the
same; a window holding more is drawn from its newest turns and the rest is
shaded. Turns running now come from what the hosts report (no query).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from markupsafe import Markup

from hyperhive.budgets import operator_zone
from hyperhive.core.api.dashboard.pictures.timeline import RUNNING, Mark, Window, lanes, timeline
from hyperhive.core.api.dashboard.state import Dashboard
from hyperhive.core.infra.linked_host import TurnState
from hyperhive.protocol import OpTopologyReq
from hyperhive.store import Store
from hyperhive.store.rows import ActivityRow

__all__ = [
    "HOURS",
    "MARKS",
    "WINDOWS",
    "ended_mark",
    "running_marks",
    "timeline_svg",
    "window_rows",
]

#: The windows the front page offers, in hours (any of 1..HOURS_MAX is accepted).
WINDOWS = (1, 6, 24)
HOURS = 6  # the default
HOURS_MAX = 7 * 24
#: The most turns one picture reads and draws.
MARKS = 1500
_BUSY = {"thinking": "turn", "compacting": "compaction"}


def ended_mark(row: ActivityRow) -> Mark:
    """A ``turn`` row of the log as a mark: it ends at the row's time and lasted its
    ``seconds`` (a row from before they were reported has none: a mark at its end)."""
    seconds = row.detail.get("seconds")
    took = float(seconds) if isinstance(seconds, int | float) and seconds > 0 else 0.0
    cost = row.detail.get("cost_usd")
    return Mark(
        start=row.at - took,
        end=row.at,
        outcome=str(row.detail.get("outcome", "ok")),
        run="compaction" if row.detail.get("run") == "compaction" else "turn",
        cost_usd=float(cost) if isinstance(cost, int | float) else None,
    )


def running_marks(
    turns: Mapping[str, TurnState], placed: Iterable[str], now: float
) -> list[tuple[str, Mark]]:
    """The turns running now (by their hosts' reports), as marks reaching ``now``."""
    out = []
    for agent in placed:
        state = turns.get(agent)
        if state is not None and state.state in _BUSY:
            start = min(state.since, now)
            out.append((agent, Mark(start, now, RUNNING, _BUSY[state.state])))
    return out


async def window_rows(
    store: Store, start: float, agent: str | None = None, limit: int = MARKS
) -> tuple[list[ActivityRow], float | None]:
    """The turn rows ending at or after ``start``, newest first, at most ``limit``; and
    where they were cut (``None``: the window's every turn is there)."""
    rows = await store.activity.page(None, limit + 1, agent=agent, kind="turn", since=start)
    if len(rows) <= limit:
        return rows, None
    return rows[:limit], rows[limit - 1].at


async def timeline_svg(d: Dashboard, hours: int, agent: str | None = None) -> Markup:
    """The picture of the last ``hours``, of ``agent`` alone when given."""
    now = time.time()
    start = now - hours * 3600
    rows, cut = await window_rows(d.parts.store, start, agent)
    running = d.parts.hostlink.running_turns()
    placed = [a for a in running if agent is None or a == agent]
    marks = [(r.agent, ended_mark(r)) for r in rows]
    marks += running_marks(running, placed, now)
    parents: dict[str, str | None] = await d.ops.request(OpTopologyReq)
    zone = operator_zone(d.parts.config.budget.timezone)
    window = Window(start, now, zone, cut, MARKS)
    return timeline(lanes(marks, parents), window)
