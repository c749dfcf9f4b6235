"""The agent page's context gauge and the budget bars: linear bars, lines where the
compaction rules are, colours by how near a limit, each figure said in words."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from hyperhive.budgets import HIVE_SCOPE, WARN_AT
from hyperhive.core.dashboard.pictures.gauges import (
    BAR_LEFT,
    BAR_WIDTH,
    GAUGE_LEFT,
    GAUGE_WIDTH,
    NARROW,
    OK,
    OVER,
    WARN,
    BudgetRow,
    Meter,
    budget_bars,
    context_gauge,
    fill,
)
from hyperhive.core.dashboard.views import budget_row, budget_rows
from hyperhive.protocol import BudgetScope, BudgetView, SpendFigures

SVG = "{http://www.w3.org/2000/svg}"


def _by_class(root: ET.Element, tag: str, css: str) -> list[ET.Element]:
    return [e for e in root.iter(f"{SVG}{tag}") if css in (e.get("class") or "").split()]


def test_half_a_limit_fills_half_the_bar() -> None:
    assert fill(0.5, 1.0, 380) == 190
    assert fill(2.5, 5.0, 100) == 50
    assert fill(7.0, 5.0, 100) == 100  # past the limit: full, never wider
    assert fill(-1.0, 5.0, 100) == 0
    assert fill(0.0, 0.0, 100) == 100  # a zero limit allows nothing: full


@pytest.mark.parametrize(
    ("usage", "color"),
    [(0.42, OK), (0.66, OK), (0.70, WARN), (0.75, OVER), (1.12, OVER)],
)
def test_the_context_gauge_fills_to_the_usage_with_both_lines(usage: float, color: str) -> None:
    root = ET.fromstring(str(context_gauge(usage, 0.66, 0.75)))
    [used] = _by_class(root, "rect", "used")
    assert float(used.get("width") or 0) == pytest.approx(min(usage, 1.0) * GAUGE_WIDTH, abs=0.01)
    assert used.get("fill") == color
    [own] = _by_class(root, "line", "own-compact")
    [mark] = _by_class(root, "line", "watermark")
    assert float(own.get("x1") or 0) == pytest.approx(GAUGE_LEFT + 0.66 * GAUGE_WIDTH, abs=0.01)
    assert float(mark.get("x1") or 0) == pytest.approx(GAUGE_LEFT + 0.75 * GAUGE_WIDTH, abs=0.01)
    words = [t.text for t in root.iter(f"{SVG}text")]
    assert "66%: may compact itself" in words and "75%: compacted after its turn" in words
    assert f"{usage:.0%}" in words
    assert root.get("data-usage") == repr(usage)


def test_the_lines_follow_the_configured_watermark() -> None:
    root = ET.fromstring(str(context_gauge(0.5, 0.66, 0.9)))
    [mark] = _by_class(root, "line", "watermark")
    assert float(mark.get("x1") or 0) == pytest.approx(GAUGE_LEFT + 0.9 * GAUGE_WIDTH, abs=0.01)
    assert "90%: compacted after its turn" in [t.text for t in root.iter(f"{SVG}text")]


def test_no_turn_yet_draws_an_empty_gauge() -> None:
    svg = str(context_gauge(None, 0.66, 0.75))
    root = ET.fromstring(svg)
    assert _by_class(root, "rect", "used") == []
    assert "no turn recorded yet" in svg and root.get("data-usage") == ""


def _meters(root: ET.Element) -> dict[str, ET.Element]:
    return {str(g.get("data-key")): g for g in _by_class(root, "g", "meter")}


def test_budget_bars_scale_colour_and_say_each_limit() -> None:
    rows = [
        BudgetRow(
            "alice",
            "alice",
            (
                Meter("usd_per_day", 0.5, 1.0),
                Meter("usd_total", 2.5, 2.0),
                Meter("tokens_per_day", 900, 1000),
            ),
            held="alice: $2.50 of its $2.00 total limit",
        ),
        BudgetRow("bob", "bob", (Meter("usd_per_day", 0.25, None),)),
    ]
    root = ET.fromstring(str(budget_bars(rows, WARN_AT)))
    alice, bob = _by_class(root, "g", "scope")
    assert alice.get("data-held") and "held" in (alice.get("class") or "")
    assert bob.get("data-held") is None
    meters = _meters(alice)

    def spent(key: str) -> ET.Element:
        [bar] = _by_class(meters[key], "rect", "spent")
        return bar

    half = spent("usd_per_day")
    assert float(half.get("x") or 0) == BAR_LEFT
    assert float(half.get("width") or 0) == pytest.approx(BAR_WIDTH / 2)
    assert half.get("fill") == OK
    assert spent("usd_total").get("fill") == OVER
    assert float(spent("usd_total").get("width") or 0) == BAR_WIDTH
    assert spent("tokens_per_day").get("fill") == WARN  # 90% ≥ the warning at 80%
    said = ["".join(t.itertext()) for t in alice.iter(f"{SVG}text")]
    assert "$0.50 today of $1.00" in said
    assert "$2.50 in total of $2.00 (×1.25)" in said
    assert "900 tok today of 1,000 tok" in said
    # No limit: no bar, the day's spend in words.
    assert _by_class(bob, "rect", "spent") == []
    assert ["".join(t.itertext()) for t in bob.iter(f"{SVG}text")][-1] == "$0.25 today, no limit"


def test_the_narrow_layout_scales_the_same() -> None:
    row = BudgetRow("alice", "alice", (Meter("usd_per_day", 0.5, 1.0),))
    root = ET.fromstring(str(budget_bars([row], WARN_AT, NARROW)))
    [bar] = _by_class(root, "rect", "spent")
    assert float(bar.get("x") or 0) == NARROW.left
    assert float(bar.get("width") or 0) == pytest.approx(NARROW.bar / 2)
    assert float(root.get("width") or 0) == NARROW.width


def test_no_rows_say_so() -> None:
    assert "no budgets set" in str(budget_bars([], WARN_AT))


def _scope(
    name: str, today: float = 0.0, total: float = 0.0, over: str | None = None, **limits: float
) -> BudgetScope:
    effective = {k: limits.get(k) for k in ("usd_per_day", "usd_total", "tokens_per_day")}
    return BudgetScope(
        scope=name,
        configured={},
        overrides={},
        effective={**effective, "tokens_total": limits.get("tokens_total")},
        today=SpendFigures(usd=today, tokens=int(today * 1000)),
        total=SpendFigures(usd=total, tokens=int(total * 1000)),
        over=over,
    )


def test_a_scope_shows_today_always_and_each_limit_it_has() -> None:
    hive = _scope(HIVE_SCOPE)
    row = budget_row(_scope("alice", 0.5, 3.0, usd_total=10.0, tokens_total=5000), hive)
    assert row.meters == (
        Meter("usd_per_day", 0.5, None),
        Meter("usd_total", 3.0, 10.0),
        Meter("tokens_total", 3000, 5000),
    )
    assert row.held is None and row.label == "alice"
    assert budget_row(hive, hive).label == "whole hive"


def test_an_agent_held_by_the_hive_says_so_and_is_listed() -> None:
    hive = _scope(HIVE_SCOPE, 2.0, 2.0, over="the whole hive: $2.00 of its $1.00 daily limit")
    view = BudgetView(
        timezone="UTC",
        day="2026-12-01",
        scopes=[hive, _scope("alice", 2.0), _scope("bob", 0.0, usd_per_day=1.0)],
    )
    rows, unlimited = budget_rows(view)
    assert [r.scope for r in rows] == [HIVE_SCOPE, "alice", "bob"]
    assert rows[1].held == "the whole hive: $2.00 of its $1.00 daily limit"
    assert unlimited == []
    calm = BudgetView(
        timezone="UTC", day="2026-12-01", scopes=[_scope(HIVE_SCOPE), _scope("alice", 2.0)]
    )
    rows, unlimited = budget_rows(calm)
    assert [r.scope for r in rows] == [HIVE_SCOPE] and unlimited == ["alice"]
