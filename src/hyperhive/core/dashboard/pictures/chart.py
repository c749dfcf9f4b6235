"""The spend chart: USD per agent per day as an inline SVG, drawn on the server.

Pure module: no I/O, no script, nothing fetched at run time. One polyline per
agent over the days; a fixed palette cycles when agents outnumber it. Every
text is escaped (agent names are already restricted, but the chart does not
rely on it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from markupsafe import Markup, escape

from hyperhive.core.dashboard.pictures.svg import money

__all__ = ["PALETTE", "nice_ceiling", "spend_chart"]

PALETTE = ("#d97706", "#2563eb", "#16a34a", "#dc2626", "#7c3aed", "#0891b2", "#db2777", "#65a30d")
WIDTH, HEIGHT = 720, 260
LEFT, RIGHT, TOP, BOTTOM = 56, 150, 16, 40


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10ⁿ at or above ``value`` (an axis top)."""
    if value <= 0:
        return 1.0
    exp = math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        top = step * 10.0**exp
        if top >= value * (1 - 1e-12):
            return top
    return 10.0 ** (exp + 1)


def spend_chart(days: Sequence[str], usd: Mapping[str, Sequence[float]]) -> Markup:
    """An ``<svg>`` of ``usd[agent][i]`` (spend on ``days[i]``), one line per agent."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    top = nice_ceiling(max((v for series in usd.values() for v in series), default=0.0))
    n = max(1, len(days) - 1)

    def x(i: int) -> float:
        return LEFT + plot_w * i / n

    def y(v: float) -> float:
        return TOP + plot_h * (1 - v / top)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="spend-chart" role="img" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'aria-label="USD spent per agent per day">',
        "<title>USD spent per agent per day</title>",
    ]
    for k in range(5):
        v = top * k / 4
        parts.append(
            f'<line class="grid" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(v):.1f}" '
            f'y2="{y(v):.1f}" stroke="#ccc" stroke-width="0.5"/>'
            f'<text class="tick" x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end" '
            f'font-size="11">{escape(money(v))}</text>'
        )
    every = max(1, math.ceil(len(days) / 7))
    for i, day in enumerate(days):
        if i % every == 0 or i == len(days) - 1:
            parts.append(
                f'<text class="day" x="{x(i):.1f}" y="{HEIGHT - BOTTOM + 18}" '
                f'text-anchor="middle" font-size="11">{escape(day[5:])}</text>'
            )
    for j, (agent, series) in enumerate(usd.items()):
        color = PALETTE[j % len(PALETTE)]
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(series))
        name = escape(agent)
        parts.append(
            f'<g class="series" data-agent="{name}"><polyline fill="none" stroke="{color}" '
            f'stroke-width="2" points="{points}"><title>{name}</title></polyline>'
        )
        for i, v in enumerate(series):
            if v:
                parts.append(
                    f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="3" fill="{color}">'
                    f"<title>{name} {escape(days[i])}: {escape(money(v))}</title></circle>"
                )
        ly = TOP + 16 * j + 8
        parts.append(
            f'<rect x="{WIDTH - RIGHT + 12}" y="{ly - 8}" width="10" height="10" fill="{color}"/>'
            f'<text class="legend" x="{WIDTH - RIGHT + 28}" y="{ly + 1}" font-size="12">'
            f"{name}</text></g>"
        )
    if not usd:
        parts.append(
            f'<text class="empty" x="{LEFT + plot_w / 2}" y="{TOP + plot_h / 2}" '
            'text-anchor="middle" font-size="13">no spend recorded yet</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))
