"""The front page's timeline: each agent's turns over a window of time, one lane per agent.

Pure module: no I/O. A turn is a mark from its start to its end, coloured by
its outcome (a turn still running reaches the window's end); a compaction is
a thinner mark. Each lane ends with what its turns cost. Lanes come in the
tree's order (roots first, each agent's children under it), so a lane keeps
its place while the picture repaints live; only agents with a turn in the
window get one.

The x axis is linear in time: a turn of 60 s in a one-hour window is 1/60 of
the plot's width (:func:`span`). A mark narrower than :data:`MIN_MARK` pixels
is widened to it, so a one-second turn in a day still shows; turns of one
outcome closer than a pixel are drawn as one mark that says how many
(:func:`place`).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from hyperhive.budgets import day_start
from hyperhive.core.dashboard.pictures.svg import duration, money, open_svg
from hyperhive.core.dashboard.views import tree_rows

__all__ = [
    "COLORS",
    "PLOT_LEFT",
    "PLOT_WIDTH",
    "RUNNING",
    "Lane",
    "Mark",
    "Placed",
    "Window",
    "lanes",
    "place",
    "span",
    "ticks",
    "timeline",
]

RUNNING = "running"
#: Fill per outcome (the turn_end outcomes, and a turn still running).
COLORS: Mapping[str, str] = {
    "ok": "#2e7d32",
    "error": "#b3261e",
    "api_error": "#e65100",
    "needs_login": "#c98a00",
    "interrupted": "#6b6f78",
    RUNNING: "#1565c0",
}
OTHER = "#9e9e9e"  # an outcome this picture does not know (a newer host's)

WIDTH = 1000
PLOT_LEFT = 150  # lane names
RIGHT = 96  # lane totals
PLOT_WIDTH = WIDTH - PLOT_LEFT - RIGHT
TOP = 4
LANE = 22
BAR, THIN = 14, 6
AXIS = 20  # tick labels under the lanes
LEGEND = 20
MIN_MARK = 2.0
MERGE = 3.0  # px: marks closer than this (same outcome and kind) are drawn as one
NAME_CHARS = 20
# Tick spacing: the smallest that gives at most MAX_TICKS over the window.
STEPS = tuple(60 * m for m in (1, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440))
MAX_TICKS = 8


@dataclass(frozen=True, slots=True)
class Mark:
    """One claude run: from ``start`` to ``end`` (Unix seconds)."""

    start: float
    end: float
    outcome: str
    run: str = "turn"  # or "compaction"
    cost_usd: float | None = None


@dataclass(frozen=True, slots=True)
class Lane:
    agent: str
    depth: int
    marks: tuple[Mark, ...]

    @property
    def ended(self) -> list[Mark]:
        return [m for m in self.marks if m.outcome != RUNNING]

    @property
    def cost_usd(self) -> float:
        return sum(m.cost_usd or 0.0 for m in self.marks)


@dataclass(frozen=True, slots=True)
class Window:
    """The span drawn, and the zone its clock times are told in.

    ``cut``: turns ending before it are not drawn (the window held more than
    the page reads); the span before it is shaded and said so.
    """

    start: float
    end: float
    zone: dt.tzinfo
    cut: float | None = None
    cut_limit: int = 0

    @property
    def seconds(self) -> float:
        return self.end - self.start


def span(
    start: float, end: float, window_start: float, window_end: float, width: float
) -> tuple[float, float] | None:
    """``(x, w)`` in pixels of ``[start, end]`` clipped to the window, ``x`` from the plot's
    left edge; ``None`` when the span lies wholly outside the window."""
    if window_end <= window_start:
        raise ValueError("a window must end after it starts")
    lo, hi = max(start, window_start), min(end, window_end)
    if hi < lo:
        return None
    scale = width / (window_end - window_start)
    return (lo - window_start) * scale, (hi - lo) * scale


def ticks(window: Window) -> list[tuple[float, str]]:
    """Round clock times in the window (``:00``, ``:30``…), at most :data:`MAX_TICKS`."""
    step = next((s for s in STEPS if window.seconds / s <= MAX_TICKS), STEPS[-1])
    midnight = day_start(window.start, window.zone)
    t = midnight + math.ceil((window.start - midnight) / step) * step
    out = []
    while t <= window.end:
        out.append((t, dt.datetime.fromtimestamp(t, window.zone).strftime("%H:%M")))
        t += step
    return out


def lanes(marks: Iterable[tuple[str, Mark]], parents: Mapping[str, str | None]) -> list[Lane]:
    """One lane per agent with a mark, in tree order (``parents``: each agent's parent).

    An agent's depth counts only ancestors that have a lane too, so a lane is
    indented under the lane it belongs to. Agents no longer in the tree come
    last, by name. Marks in a lane are in time order.
    """
    by_agent: dict[str, list[Mark]] = {}
    for agent, mark in marks:
        by_agent.setdefault(agent, []).append(mark)

    def drawn_parent(name: str) -> str | None:
        seen = {name}
        parent = parents.get(name)
        while parent is not None and parent not in by_agent and parent not in seen:
            seen.add(parent)
            parent = parents.get(parent)
        return parent if parent in by_agent and parent not in seen else None

    rows = [{"name": a, "parent": drawn_parent(a)} for a in by_agent]
    return [
        Lane(
            str(r.agent["name"]),
            r.depth,
            tuple(sorted(by_agent[str(r.agent["name"])], key=lambda m: (m.start, m.end))),
        )
        for r in tree_rows(rows)
    ]


def _clock(t: float, zone: dt.tzinfo) -> str:
    return dt.datetime.fromtimestamp(t, zone).strftime("%H:%M:%S")


@dataclass(frozen=True, slots=True)
class Placed:
    """Marks as drawn: ``x`` and ``w`` in pixels from the plot's left; ``turns`` of them."""

    x: float
    w: float
    start: float
    end: float
    outcome: str
    run: str
    cost_usd: float | None
    turns: int = 1


def _add(a: float | None, b: float | None) -> float | None:
    return a if b is None else b if a is None else a + b


def place(marks: Sequence[Mark], window: Window, width: float = PLOT_WIDTH) -> list[Placed]:
    """Where each mark goes (at least :data:`MIN_MARK` wide). Marks of one outcome and
    kind less than :data:`MERGE` pixels apart become one, so a busy lane over a long
    window is a few bars rather than thousands a pixel wide each."""
    out: list[Placed] = []
    for m in sorted(marks, key=lambda m: (m.start, m.end)):
        placed = span(m.start, m.end, window.start, window.end, width)
        if placed is None:
            continue
        x, w = placed
        if w < MIN_MARK:
            x, w = max(0.0, min(x, width - MIN_MARK)), MIN_MARK
        last = out[-1] if out else None
        if (
            last is not None
            and m.outcome == last.outcome != RUNNING
            and m.run == last.run
            and x <= last.x + last.w + MERGE
        ):
            right = max(last.x + last.w, x + w)
            out[-1] = Placed(
                last.x,
                right - last.x,
                min(last.start, m.start),
                max(last.end, m.end),
                m.outcome,
                m.run,
                _add(last.cost_usd, m.cost_usd),
                last.turns + 1,
            )
        else:
            out.append(Placed(x, w, m.start, m.end, m.outcome, m.run, m.cost_usd))
    return out


def _mark_title(agent: str, m: Placed, window: Window) -> str:
    if m.outcome == RUNNING:
        doing = "compacting" if m.run == "compaction" else "thinking"
        return (
            f"{agent}: {doing} since {_clock(m.start, window.zone)} "
            f"({duration(window.end - m.start)} so far)"
        )
    when = f"{_clock(m.start, window.zone)}–{_clock(m.end, window.zone)}"
    cost = f" · {money(m.cost_usd)}" if m.cost_usd is not None else ""
    if m.turns > 1:
        return f"{agent}: {m.turns} {m.run}s {m.outcome} · {when}{cost}"
    return f"{agent}: {m.run} {m.outcome} · {when} ({duration(m.end - m.start)}){cost}"


def _name(agent: str) -> str:
    return agent if len(agent) <= NAME_CHARS else agent[: NAME_CHARS - 1] + "…"


def _marks(lane: Lane, y: float, window: Window) -> list[str]:
    out = []
    for m in place(lane.marks, window):
        color = COLORS.get(m.outcome, OTHER)
        h = THIN if m.run == "compaction" else BAR
        cost = "" if m.cost_usd is None else f' data-cost="{m.cost_usd!r}"'
        turns = f' data-turns="{m.turns}"' if m.turns > 1 else ""
        out.append(
            f'<rect class="mark {"running" if m.outcome == RUNNING else "ended"}" '
            f'x="{PLOT_LEFT + m.x:.2f}" y="{y + (LANE - h) / 2:.1f}" width="{m.w:.2f}" '
            f'height="{h}" rx="2" fill="{color}" data-outcome="{escape(m.outcome)}" '
            f'data-run="{escape(m.run)}" data-start="{m.start!r}" data-end="{m.end!r}"'
            f"{cost}{turns}><title>{escape(_mark_title(lane.agent, m, window))}</title></rect>"
        )
    return out


def _legend(y: float) -> list[str]:
    out, x = [], float(PLOT_LEFT)
    for outcome, color in COLORS.items():
        label = outcome.replace("_", " ")
        out.append(
            f'<rect x="{x:.0f}" y="{y - 9}" width="10" height="10" rx="2" fill="{color}"/>'
            f'<text class="legend" x="{x + 14:.0f}" y="{y}" font-size="11">{label}</text>'
        )
        x += 26 + 6.5 * len(label)
    out.append(
        f'<rect x="{x:.0f}" y="{y - 6}" width="14" height="{THIN / 2:g}" fill="#8a8a8a"/>'
        f'<text class="legend" x="{x + 18:.0f}" y="{y}" font-size="11">thin: compaction</text>'
    )
    return out


def timeline(drawn: Sequence[Lane], window: Window) -> Markup:
    """An ``<svg>`` of ``drawn`` lanes over ``window``."""
    rows = max(1, len(drawn))
    height = TOP + rows * LANE + AXIS + LEGEND
    bottom = TOP + rows * LANE
    label = f"turns per agent from {_clock(window.start, window.zone)} to now"
    parts: list[str] = [
        open_svg("timeline", WIDTH, height, label, start=repr(window.start), end=repr(window.end))
    ]
    if window.cut is not None and window.cut > window.start:
        placed = span(window.start, window.cut, window.start, window.end, PLOT_WIDTH)
        assert placed is not None
        parts.append(
            f'<rect class="cut" x="{PLOT_LEFT}" y="{TOP}" width="{placed[1]:.2f}" '
            f'height="{rows * LANE}" fill="#eceae4"><title>turns before '
            f"{_clock(window.cut, window.zone)} are not drawn: the window holds more than "
            f"{window.cut_limit}; choose a shorter one</title></rect>"
        )
    for t, text in ticks(window):
        placed = span(t, t, window.start, window.end, PLOT_WIDTH)
        assert placed is not None
        x = PLOT_LEFT + placed[0]
        parts.append(
            f'<line class="grid" x1="{x:.2f}" x2="{x:.2f}" y1="{TOP}" y2="{bottom}" '
            f'stroke="#ddd" stroke-width="0.5"/><text class="tick" x="{x:.2f}" '
            f'y="{bottom + 14}" text-anchor="middle" font-size="11">{text}</text>'
        )
    since = _clock(window.cut or window.start, window.zone)
    for i, lane in enumerate(drawn):
        y = TOP + i * LANE
        name = escape(lane.agent)
        ended = lane.ended
        running = len(lane.marks) - len(ended)
        said = f"{len(ended)} turn{'s' * (len(ended) != 1)}" + (
            f", {running} running" if running else ""
        )
        parts.append(
            f'<g class="lane" data-agent="{name}" data-turns="{len(ended)}" '
            f'data-cost="{lane.cost_usd!r}">'
            f'<line x1="{PLOT_LEFT}" x2="{PLOT_LEFT + PLOT_WIDTH}" y1="{y + LANE / 2:.1f}" '
            f'y2="{y + LANE / 2:.1f}" stroke="#eee"/>'
            f'<text class="name" x="{8 + 10 * min(lane.depth, 4)}" y="{y + LANE / 2 + 4:.1f}" '
            f'font-size="12"><title>{name}</title>{escape(_name(lane.agent))}</text>'
        )
        parts += _marks(lane, y, window)
        parts.append(
            f'<text class="lane-total" x="{WIDTH - 6}" y="{y + LANE / 2 + 4:.1f}" '
            f'text-anchor="end" font-size="12">{escape(money(lane.cost_usd))}'
            f"<title>{name}: {escape(said)} since {since}, "
            f"{escape(money(lane.cost_usd))}</title></text></g>"
        )
    if not drawn:
        parts.append(
            f'<text class="empty" x="{PLOT_LEFT + PLOT_WIDTH / 2}" y="{TOP + LANE / 2 + 4}" '
            f'text-anchor="middle" font-size="13">no turns in this window</text>'
        )
    parts += _legend(height - 5)
    parts.append("</svg>")
    return Markup("".join(parts))
