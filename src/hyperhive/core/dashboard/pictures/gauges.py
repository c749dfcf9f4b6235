"""Gauges: an agent's context usage against the compaction lines, and spend against budgets.

Pure module: no I/O. Bars are linear: half of a limit spent fills half the
bar (:func:`fill`); past the limit the bar is full, red, and says by how much.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from hyperhive.core.dashboard.pictures.svg import money, open_svg, tokens

__all__ = [
    "BAR_LEFT",
    "BAR_WIDTH",
    "NARROW",
    "WIDE",
    "GAUGE_LEFT",
    "GAUGE_WIDTH",
    "BudgetRow",
    "Layout",
    "Meter",
    "budget_bars",
    "context_gauge",
    "fill",
]

OK, WARN, OVER, TRACK = "#2e7d32", "#c98a00", "#b3261e", "#eceae4"

GAUGE_LEFT, GAUGE_WIDTH, GAUGE_HEIGHT = 8, 440, 60
GAUGE_BAR_Y, GAUGE_BAR_H = 22, 16


def fill(value: float, limit: float, width: float) -> float:
    """Pixels of a ``width`` bar that ``value`` of ``limit`` fills (full at or past it;
    a zero limit is full: it allows nothing)."""
    if limit <= 0:
        return width
    return width * min(1.0, max(0.0, value / limit))


def context_gauge(usage: float | None, own_compact: float, watermark: float) -> Markup:
    """How full the agent's context was after its last turn, with two lines: above
    ``own_compact`` the agent may ask to compact itself; at ``watermark`` the hive
    compacts it after the turn."""
    label = (
        "context usage: no turn recorded yet"
        if usage is None
        else f"context usage after the last turn: {usage:.0%}"
    )
    parts: list[str] = [
        open_svg(
            "context-gauge",
            GAUGE_LEFT * 2 + GAUGE_WIDTH + 60,
            GAUGE_HEIGHT,
            label,
            usage="" if usage is None else repr(usage),
            own_compact=repr(own_compact),
            watermark=repr(watermark),
        ),
        f'<rect class="track" x="{GAUGE_LEFT}" y="{GAUGE_BAR_Y}" width="{GAUGE_WIDTH}" '
        f'height="{GAUGE_BAR_H}" rx="3" fill="{TRACK}"/>',
    ]
    if usage is not None:
        color = OK if usage <= own_compact else WARN if usage < watermark else OVER
        parts.append(
            f'<rect class="used" x="{GAUGE_LEFT}" y="{GAUGE_BAR_Y}" '
            f'width="{fill(usage, 1.0, GAUGE_WIDTH):.2f}" height="{GAUGE_BAR_H}" rx="3" '
            f'fill="{color}"><title>{escape(label)}</title></rect>'
        )
    # One line's words above the bar, the other's below, so close lines never overlap.
    for css, at, text, y in (
        ("own-compact", own_compact, f"{own_compact:.0%}: may compact itself", 14),
        ("watermark", watermark, f"{watermark:.0%}: compacted after its turn", 52),
    ):
        x = GAUGE_LEFT + fill(at, 1.0, GAUGE_WIDTH)
        parts.append(
            f'<line class="{css}" x1="{x:.2f}" x2="{x:.2f}" y1="{GAUGE_BAR_Y - 4}" '
            f'y2="{GAUGE_BAR_Y + GAUGE_BAR_H + 4}" stroke="#1d1f24" stroke-width="1.5" '
            f'stroke-dasharray="3 2"/><text class="{css}" x="{x:.2f}" y="{y}" '
            f'text-anchor="middle" font-size="11">{escape(text)}</text>'
        )
    shown = "–" if usage is None else f"{usage:.0%}"
    parts.append(
        f'<text class="value" x="{GAUGE_LEFT + GAUGE_WIDTH + 8}" y="{GAUGE_BAR_Y + 13}" '
        f'font-size="14" font-weight="600">{shown}</text></svg>'
    )
    return Markup("".join(parts))


@dataclass(frozen=True, slots=True)
class Meter:
    """One limit of a scope: what was spent against it (``limit`` None: unlimited)."""

    key: str  # a budgets.LimitKey
    spent: float
    limit: float | None

    @property
    def fraction(self) -> float | None:
        if self.limit is None:
            return None
        if self.limit <= 0:
            return math.inf if self.spent > 0 else 1.0
        return self.spent / self.limit

    def words(self) -> str:
        say = money if self.key.startswith("usd") else tokens
        period = "today" if self.key.endswith("per_day") else "in total"
        if self.limit is None:
            return f"{say(self.spent)} {period}, no limit"
        return f"{say(self.spent)} {period} of {say(self.limit)}"


@dataclass(frozen=True, slots=True)
class BudgetRow:
    """A scope (an agent, or the whole hive) and its meters; ``held``: why it takes no
    new turns (its own limit or the hive's), None if it is not held."""

    scope: str
    label: str
    meters: tuple[Meter, ...]
    held: str | None = None


@dataclass(frozen=True, slots=True)
class Layout:
    """Widths of the labels, the bars and the words after them."""

    left: float
    bar: float
    words: float

    @property
    def width(self) -> float:
        return self.left + self.bar + self.words


#: The spend page's layout (a whole card), and the agent page's (half of one).
WIDE = Layout(150, 380, 260)
NARROW = Layout(90, 200, 210)
BAR_LEFT, BAR_WIDTH = WIDE.left, WIDE.bar
ROW_GAP, METER_H, METER_BAR = 8, 20, 12


def _meter(m: Meter, y: float, warn_at: float, at: Layout) -> str:
    words = escape(m.words())
    frac = m.fraction
    head = (
        f'<g class="meter" data-key="{escape(m.key)}" data-spent="{m.spent!r}" '
        f'data-limit="{"" if m.limit is None else repr(m.limit)}">'
    )
    text_x = at.left + at.bar + 8
    if m.limit is None or frac is None:
        return (
            f'{head}<text class="words" x="{at.left}" y="{y + 11}" font-size="12">'
            f"{words}</text></g>"
        )
    color = OVER if frac >= 1 else WARN if frac >= warn_at else OK
    over = f" (×{frac:.2f})" if frac > 1 and frac != math.inf else ""
    return (
        f'{head}<rect class="track" x="{at.left}" y="{y}" width="{at.bar}" '
        f'height="{METER_BAR}" rx="3" fill="{TRACK}"/>'
        f'<rect class="spent" x="{at.left}" y="{y}" '
        f'width="{fill(m.spent, m.limit, at.bar):.2f}" height="{METER_BAR}" rx="3" '
        f'fill="{color}"><title>{words}</title></rect>'
        f'<text class="words" x="{text_x}" y="{y + 11}" font-size="12">{words}'
        f"{escape(over)}</text></g>"
    )


def _lines(row: BudgetRow) -> int:
    return max(len(row.meters), 2 if row.held else 1)


def budget_bars(rows: Sequence[BudgetRow], warn_at: float, at: Layout = WIDE) -> Markup:
    """One block per scope: a bar per limit it has (a line of words for one it has not),
    red when spent, amber from ``warn_at`` of it; a held scope says so."""
    height = sum(_lines(r) * METER_H + ROW_GAP for r in rows) + ROW_GAP
    parts: list[str] = [open_svg("budget-bars", at.width, max(height, 30), "spend against budgets")]
    y = float(ROW_GAP)
    for row in rows:
        held = f' data-held="{escape(row.held)}"' if row.held else ""
        parts.append(
            f'<g class="scope{" held" if row.held else ""}" data-scope="{escape(row.scope)}"'
            f"{held}>"
            f'<text class="label" x="8" y="{y + 11}" font-size="12" font-weight="600">'
            f"{escape(row.label)}</text>"
        )
        if row.held:
            parts.append(
                f'<text class="held" x="8" y="{y + 11 + 14}" font-size="11" fill="{OVER}">'
                f"held<title>{escape(row.held)}</title></text>"
            )
        for i, m in enumerate(row.meters):
            parts.append(_meter(m, y + i * METER_H, warn_at, at))
        parts.append("</g>")
        y += _lines(row) * METER_H + ROW_GAP
    if not rows:
        parts.append('<text class="empty" x="8" y="20" font-size="13">no budgets set</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
