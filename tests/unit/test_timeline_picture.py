"""The front page's timeline is plain SVG from the server: time scaled linearly across the
plot, lanes in tree order, marks coloured by outcome, each lane's cost summed."""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperhive.core.dashboard.pictures.timeline import (
    COLORS,
    MIN_MARK,
    PLOT_LEFT,
    PLOT_WIDTH,
    RUNNING,
    Lane,
    Mark,
    Window,
    lanes,
    place,
    span,
    ticks,
    timeline,
)
from hyperhive.core.dashboard.turns import ended_mark, running_marks
from hyperhive.core.linked_host import TurnState
from hyperhive.store.rows import ActivityRow

SVG = "{http://www.w3.org/2000/svg}"
UTC = dt.UTC
# 2026-12-01 10:00:00 UTC
T0 = dt.datetime(2026, 12, 1, 10, 0, tzinfo=UTC).timestamp()
HOUR = Window(T0, T0 + 3600, UTC)


def test_a_turn_of_60_s_in_an_hour_is_a_sixtieth_of_the_width() -> None:
    x, w = span(T0 + 1800, T0 + 1860, T0, T0 + 3600, PLOT_WIDTH) or (0, 0)
    assert w == pytest.approx(PLOT_WIDTH / 60)
    assert x == pytest.approx(PLOT_WIDTH / 2)  # it started half way through the hour


def test_a_span_is_clipped_to_the_window_and_one_outside_is_not_drawn() -> None:
    assert span(T0 - 600, T0 + 900, T0, T0 + 3600, 360.0) == (0.0, 90.0)
    assert span(T0 + 3000, T0 + 4200, T0, T0 + 3600, 360.0) == (300.0, 60.0)
    assert span(T0 - 60, T0 - 1, T0, T0 + 3600, 360.0) is None
    with pytest.raises(ValueError, match="must end after it starts"):
        span(T0, T0 + 1, T0, T0, 360.0)


@given(
    st.floats(0, 1),
    st.floats(0, 1),
    st.floats(60, 7 * 86400, allow_nan=False),
)
def test_spans_stay_inside_the_plot_and_scale_linearly(a: float, b: float, seconds: float) -> None:
    start, end = sorted((T0 + a * seconds, T0 + b * seconds))
    placed = span(start, end, T0, T0 + seconds, PLOT_WIDTH)
    assert placed is not None
    x, w = placed
    assert -1e-6 <= x and x + w <= PLOT_WIDTH + 1e-6
    assert w == pytest.approx((end - start) / seconds * PLOT_WIDTH, abs=1e-6)


def _marks(svg: ET.Element) -> list[ET.Element]:
    return [e for e in svg.iter(f"{SVG}rect") if "mark" in (e.get("class") or "").split()]


def test_the_picture_draws_each_turn_where_and_as_it_ended() -> None:
    drawn = [
        Lane(
            "queen",
            0,
            (
                Mark(T0 + 1800, T0 + 1860, "ok", cost_usd=0.25),
                Mark(T0 + 3000, T0 + 3060, "api_error", cost_usd=0.0),
                Mark(T0 + 3200, T0 + 3260, "ok", "compaction", cost_usd=0.125),
            ),
        ),
        Lane("a<b", 1, (Mark(T0 + 3500, T0 + 3600, RUNNING),)),
    ]
    svg = str(timeline(drawn, HOUR))
    root = ET.fromstring(svg)  # well-formed: an unescaped "<" in a name would break the parse
    assert "<script" not in svg and "href" not in svg
    lanes_ = root.findall(f"{SVG}g")
    assert [g.get("data-agent") for g in lanes_] == ["queen", "a<b"]
    assert [g.get("data-turns") for g in lanes_] == ["3", "0"]
    assert float(lanes_[0].get("data-cost") or "nan") == 0.375
    total = next(t for t in lanes_[0].iter(f"{SVG}text") if t.get("class") == "lane-total")
    assert (total.text or "").strip() == "$0.38"
    first, error, compaction, running = _marks(root)
    assert float(first.get("x") or 0) == pytest.approx(PLOT_LEFT + PLOT_WIDTH / 2, abs=0.01)
    assert float(first.get("width") or 0) == pytest.approx(PLOT_WIDTH / 60, abs=0.01)
    assert first.get("fill") == COLORS["ok"] and error.get("fill") == COLORS["api_error"]
    assert float(first.get("data-cost") or 0) == 0.25
    assert float(compaction.get("height") or 0) < float(first.get("height") or 0)
    title = first.find(f"{SVG}title")
    assert title is not None and title.text == "queen: turn ok · 10:30:00–10:31:00 (1 min) · $0.25"
    # A running turn reaches the window's end (now), in the running colour, with no cost.
    assert running.get("data-outcome") == RUNNING and running.get("data-cost") is None
    right = float(running.get("x") or 0) + float(running.get("width") or 0)
    assert right == pytest.approx(PLOT_LEFT + PLOT_WIDTH, abs=0.02)
    assert running.get("fill") == COLORS[RUNNING]


def test_a_one_second_turn_in_a_day_still_shows() -> None:
    day = Window(T0, T0 + 86400, UTC)
    svg = ET.fromstring(str(timeline([Lane("bob", 0, (Mark(T0 + 86399, T0 + 86400, "ok"),))], day)))
    [mark] = _marks(svg)
    assert float(mark.get("width") or 0) == MIN_MARK
    assert float(mark.get("x") or 0) + MIN_MARK <= PLOT_LEFT + PLOT_WIDTH + 1e-6


def _every_two_minutes(n: int, outcome: str = "ok") -> list[Mark]:
    return [Mark(T0 + 120 * i, T0 + 120 * i + 60, outcome, cost_usd=0.25) for i in range(n)]


def test_turns_closer_than_a_pixel_are_one_mark_that_says_how_many() -> None:
    day = Window(T0, T0 + 86400, UTC)
    marks = _every_two_minutes(30)
    [one] = place(marks, day)
    assert one.turns == 30 and one.cost_usd == 7.5
    assert (one.start, one.end) == (T0, T0 + 120 * 29 + 60)
    assert one.x == 0 and one.w == pytest.approx((120 * 29 + 60) / 86400 * PLOT_WIDTH, abs=MIN_MARK)
    # An error between them splits the run: what went wrong stays visible.
    marks[15] = Mark(marks[15].start, marks[15].end, "error", cost_usd=0.25)
    assert [(p.outcome, p.turns) for p in place(marks, day)] == [
        ("ok", 15),
        ("error", 1),
        ("ok", 14),
    ]
    # In an hour the same turns are 25 px apart: one mark each.
    assert [p.turns for p in place(_every_two_minutes(30), HOUR)] == [1] * 30


def test_compactions_and_running_turns_are_never_merged_into_turns() -> None:
    day = Window(T0, T0 + 86400, UTC)
    marks = [
        Mark(T0, T0 + 60, "ok"),
        Mark(T0 + 60, T0 + 90, "ok", "compaction"),
        Mark(T0 + 120, T0 + 150, RUNNING),
        Mark(T0 + 130, T0 + 160, RUNNING),
    ]
    assert [(p.run, p.outcome, p.turns) for p in place(marks, day)] == [
        ("turn", "ok", 1),
        ("compaction", "ok", 1),
        ("turn", RUNNING, 1),
        ("turn", RUNNING, 1),
    ]


def test_a_merged_mark_is_drawn_once_with_its_count_and_cost() -> None:
    day = Window(T0, T0 + 86400, UTC)
    root = ET.fromstring(str(timeline([Lane("bob", 0, tuple(_every_two_minutes(30)))], day)))
    [mark] = _marks(root)
    assert mark.get("data-turns") == "30" and float(mark.get("data-cost") or 0) == 7.5
    title = mark.find(f"{SVG}title")
    assert title is not None and title.text == "bob: 30 turns ok · 10:00:00–10:59:00 · $7.50"
    [lane] = root.findall(f"{SVG}g")
    assert lane.get("data-turns") == "30"


def test_an_outcome_it_does_not_know_is_drawn_grey_and_escaped() -> None:
    svg = str(timeline([Lane("bob", 0, (Mark(T0, T0 + 60, 'x"><script>'),))], HOUR))
    ET.fromstring(svg)
    assert "<script>" not in svg


def test_a_window_with_more_turns_than_drawn_shades_and_says_so() -> None:
    cut = Window(T0, T0 + 3600, UTC, cut=T0 + 900, cut_limit=1500)
    root = ET.fromstring(str(timeline([Lane("bob", 0, (Mark(T0 + 1000, T0 + 1100, "ok"),))], cut)))
    [shade] = [e for e in root.iter(f"{SVG}rect") if e.get("class") == "cut"]
    assert float(shade.get("width") or 0) == pytest.approx(PLOT_WIDTH / 4, abs=0.01)
    title = shade.find(f"{SVG}title")
    assert title is not None and "more than 1500" in (title.text or "")
    total = next(t for t in root.iter(f"{SVG}title") if (t.text or "").startswith("bob: 1 turn"))
    assert total.text == "bob: 1 turn since 10:15:00, $0.00"


def test_no_turns_says_so() -> None:
    svg = str(timeline([], HOUR))
    assert "no turns in this window" in svg
    ET.fromstring(svg)


def test_lanes_follow_the_tree_and_indent_under_drawn_ancestors_only() -> None:
    parents = {"queen": None, "alice": "queen", "carol": "alice", "bob": None, "dave": "bob"}
    mark = Mark(T0, T0 + 1, "ok")
    drawn = lanes(
        [("dave", mark), ("carol", mark), ("queen", mark), ("gone", mark), ("carol", mark)],
        parents,
    )
    # bob has no turn: dave is a root among the drawn; alice neither: carol sits under queen.
    assert [(lane.agent, lane.depth, len(lane.marks)) for lane in drawn] == [
        ("dave", 0, 1),
        ("gone", 0, 1),
        ("queen", 0, 1),
        ("carol", 1, 2),
    ]


def test_a_cycle_in_the_tree_still_gives_each_agent_one_lane() -> None:
    mark = Mark(T0, T0 + 1, "ok")
    drawn = lanes([("a", mark), ("b", mark)], {"a": "b", "b": "a"})
    assert sorted(lane.agent for lane in drawn) == ["a", "b"]


@pytest.mark.parametrize(
    ("hours", "first", "count"),
    [(1, "10:10", 6), (6, "11:00", 6), (24, "12:00", 8)],
)
def test_ticks_fall_on_round_clock_times(hours: int, first: str, count: int) -> None:
    start = T0 + 300  # 10:05 UTC
    window = Window(start, start + hours * 3600, UTC)
    got = ticks(window)
    assert got[0][1] == first and len(got) == count
    assert all(window.start <= t <= window.end for t, _ in got)


def test_ticks_are_told_in_the_operators_zone() -> None:
    berlin = Window(T0, T0 + 3600, dt.timezone(dt.timedelta(hours=1)))
    assert ticks(berlin)[0] == (T0, "11:00")


def _row(detail: dict[str, object], at: float = T0 + 600) -> ActivityRow:
    return ActivityRow(1, at, "turn", "alice", (), "alice: turn", detail)


def test_a_logged_turn_ends_at_its_row_and_lasted_its_seconds() -> None:
    mark = ended_mark(_row({"outcome": "error", "seconds": 60.5, "cost_usd": 0.01}))
    assert mark == Mark(T0 + 539.5, T0 + 600, "error", "turn", 0.01)
    compaction = ended_mark(_row({"outcome": "ok", "run": "compaction", "seconds": 3}))
    assert compaction.run == "compaction" and compaction.cost_usd is None
    # A row from before durations were reported: a mark at its end.
    assert ended_mark(_row({"outcome": "ok"})) == Mark(T0 + 600, T0 + 600, "ok")
    assert ended_mark(_row({"seconds": "soon", "cost_usd": "free"})) == Mark(
        T0 + 600, T0 + 600, "ok"
    )


def test_running_turns_are_the_placed_agents_thinking_or_compacting() -> None:
    turns = {
        "alice": TurnState("thinking", T0),
        "bob": TurnState("compacting", T0 + 10),
        "carol": TurnState("idle", T0),
        "dave": TurnState("thinking", T0 + 99999),  # a host clock ahead: never past now
        "eve": TurnState("thinking", T0),  # not placed (stale): not drawn
    }
    got = running_marks(turns, ["alice", "bob", "carol", "dave", "zed"], T0 + 100)
    assert got == [
        ("alice", Mark(T0, T0 + 100, RUNNING, "turn")),
        ("bob", Mark(T0 + 10, T0 + 100, RUNNING, "compaction")),
        ("dave", Mark(T0 + 100, T0 + 100, RUNNING, "turn")),
    ]
