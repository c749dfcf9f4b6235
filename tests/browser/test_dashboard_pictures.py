"""The dashboard's pictures in a real browser: the front page's timeline of turns, the
agent page's context gauge and budget, the spend page's budget bars. Each is checked
against figures known in advance, and each repaints live when a turn ends, spend is
recorded or a limit changes."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from hyperhive.config import AgentConfig
from hyperhive.core.api.agent_api import COMPACT_THRESHOLD
from hyperhive.core.api.dashboard.pictures.gauges import (
    BAR_WIDTH,
    GAUGE_LEFT,
    GAUGE_WIDTH,
    NARROW,
    OK,
    WARN,
)
from hyperhive.core.api.dashboard.pictures.svg import money
from hyperhive.core.api.dashboard.pictures.timeline import COLORS, MIN_MARK, PLOT_LEFT, PLOT_WIDTH
from tests.browser.conftest import LiveHive, live_hive, screenshot
from tests.support.hive import agent_env, seed_home
from tests.support.model_server import ModelServer, Stall, Usage, text

pytestmark = pytest.mark.timeout(180)

HIVE_TOML = 'runtime = "unsandboxed"\ndashboard_port = 0\ndashboard_auth = "loopback"\n'


def _turn_end(
    hive: LiveHive, agent: str, outcome: str, seconds: float, usd: float, kind: str = "turn"
) -> None:
    """What a harness reports at the end of a claude run, on the agent's own socket."""
    # A session of its own per run: the coordinator counts its totals whole (runcost).
    spend = {
        "run_id": uuid.uuid4().hex,
        "kind": kind,
        "session_id": uuid.uuid4().hex,
        "session_totals": {"claude-sonnet-4-5": {"cost_usd": usd, "input_tokens": 10}},
    }
    hive.as_agent(agent, "turn_end", outcome=outcome, seconds=seconds, spend=spend)


def _num(loc: Locator, attr: str) -> float:
    value = loc.get_attribute(attr)
    assert value is not None, f"no {attr}"
    return float(value)


def _svg_window(page: Page) -> tuple[float, float]:
    svg = page.locator("#timeline svg.timeline")
    return _num(svg, "data-start"), _num(svg, "data-end")


def _placed(page: Page, mark: Locator) -> tuple[float, float]:
    """Where ``mark`` must be, from its own times and the window the page drew."""
    start, end = _svg_window(page)
    scale = PLOT_WIDTH / (end - start)
    return PLOT_LEFT + (_num(mark, "data-start") - start) * scale, (
        _num(mark, "data-end") - _num(mark, "data-start")
    ) * scale


def _lane_order(page: Page) -> list[str]:
    return [
        str(a)
        for a in page.locator("#timeline g.lane").evaluate_all(
            "els => els.map(e => e.dataset.agent)"
        )
    ]


def test_the_timeline_draws_turns_to_scale_in_tree_order_and_follows_them_live(
    tmp_path: Path, page: Page
) -> None:
    tree = {"queen": None, "alice": "queen", "bob": None}
    seed_home(tmp_path, {n: AgentConfig() for n in tree}, tree, hive_toml=HIVE_TOML)
    with live_hive(tmp_path) as hive:
        _turn_end(hive, "queen", "ok", 120, 0.25)
        _turn_end(hive, "bob", "error", 300, 0.5)
        _turn_end(hive, "bob", "ok", 30, 0.25, kind="compaction")
        page.goto(f"{hive.url}/?hours=1")
        expect(page.locator("body")).to_have_attribute("data-live", "1")
        expect(page.locator("#timeline g.lane")).to_have_count(2)
        assert _lane_order(page) == ["bob", "queen"]  # roots by name; alice took no turn

        queen = page.locator('#timeline g.lane[data-agent="queen"]')
        [mark] = queen.locator("rect.mark").all()
        assert _num(mark, "data-end") - _num(mark, "data-start") == 120
        x, width = _placed(page, mark)
        assert width == pytest.approx(PLOT_WIDTH / 30, abs=0.05)  # 2 min of an hour
        assert _num(mark, "x") == pytest.approx(x, abs=0.05)
        assert _num(mark, "width") == pytest.approx(width, abs=0.05)
        assert mark.get_attribute("fill") == COLORS["ok"]
        assert _num(mark, "data-cost") == 0.25
        expect(queen.locator("text.lane-total")).to_contain_text("$0.25")

        bob = page.locator('#timeline g.lane[data-agent="bob"]')
        expect(bob.locator("rect.mark")).to_have_count(2)
        error = bob.locator('rect.mark[data-outcome="error"]')
        assert error.get_attribute("fill") == COLORS["error"]
        assert _num(error, "width") == pytest.approx(PLOT_WIDTH * 300 / 3600, abs=0.05)
        compaction = bob.locator('rect.mark[data-run="compaction"]')
        assert _num(compaction, "height") < _num(error, "height")
        assert _num(bob, "data-cost") == 0.75 and _num(bob, "data-turns") == 2
        expect(bob.locator("text.lane-total")).to_contain_text("$0.75")
        screenshot(page, "timeline.png")

        # A turn ending while the page is open: alice's lane appears under queen's.
        _turn_end(hive, "alice", "api_error", 90, 0.1)
        expect(page.locator("#timeline g.lane")).to_have_count(3)
        assert _lane_order(page) == ["bob", "queen", "alice"]
        alice = page.locator('#timeline g.lane[data-agent="alice"]')
        [late] = alice.locator("rect.mark").all()
        assert late.get_attribute("fill") == COLORS["api_error"]
        assert _num(late, "width") == pytest.approx(PLOT_WIDTH * 90 / 3600, abs=0.05)
        assert _num(alice.locator("text.name"), "x") > _num(queen.locator("text.name"), "x")
        expect(alice.locator("text.lane-total")).to_contain_text("$0.10")

        # Another window: the same turn is six times narrower in six hours.
        page.click('nav.windows a[data-hours="6"]')
        expect(page).to_have_url(f"{hive.url}/?agent=&kind=&hours=6")
        mark = page.locator('#timeline g.lane[data-agent="queen"] rect.mark')
        assert _num(mark, "width") == pytest.approx(PLOT_WIDTH / 180, abs=0.05)
        page.click('nav.windows a[data-hours="24"]')
        expect(page).to_have_url(f"{hive.url}/?agent=&kind=&hours=24")
        mark = page.locator('#timeline g.lane[data-agent="queen"] rect.mark')
        assert PLOT_WIDTH / 720 < MIN_MARK and _num(mark, "width") == MIN_MARK  # still shows
        # The feed's agent filter narrows the picture too, and keeps its window.
        page.select_option("select[name=agent]", "bob")
        page.click("#activity-filter button")
        expect(page).to_have_url(f"{hive.url}/?agent=bob&kind=&hours=24")
        expect(page.locator("#timeline g.lane")).to_have_count(1)
        assert _lane_order(page) == ["bob"]


def test_a_real_turn_runs_then_ends_on_the_timeline_and_fills_the_context_gauge(
    tmp_path: Path, page: Page, browser: Browser, claude_bin: Path, model_server: ModelServer
) -> None:
    """The real claude CLI against the scripted model: a window of 10,000 tokens, a first
    turn whose last call sent 4,200 (42%), a second 7,000 (70%: past the agent's own
    compact threshold, short of the configured watermark of 90%)."""
    gate = threading.Event()
    model_server.set_script(
        [
            Stall(release=gate, then=text("done", Usage(input_tokens=4200, output_tokens=10))),
            text("again", Usage(input_tokens=7000, output_tokens=10)),
        ]
    )
    seed_home(
        tmp_path,
        {"alice": AgentConfig(env=agent_env(model_server.url))},
        {"alice": None},
        hive_toml=HIVE_TOML + "context_window = 10000\ncompact_watermark = 0.9\n",
    )
    with live_hive(tmp_path, claude_bin) as hive:
        page.goto(f"{hive.url}/agents/alice")
        expect(page.locator("body")).to_have_attribute("data-live", "1")
        gauge = page.locator("#context-gauge svg.context-gauge")
        expect(gauge).to_have_attribute("data-usage", "")
        expect(gauge).to_contain_text("no turn recorded yet")
        # The lines where the rules are: the compact tool's threshold, the configured mark.
        own, mark = gauge.locator("line.own-compact"), gauge.locator("line.watermark")
        assert _num(own, "x1") == pytest.approx(GAUGE_LEFT + COMPACT_THRESHOLD * GAUGE_WIDTH)
        assert _num(mark, "x1") == pytest.approx(GAUGE_LEFT + 0.9 * GAUGE_WIDTH)
        expect(gauge.locator("text.watermark")).to_have_text("90%: compacted after its turn")

        front = browser.new_context(viewport={"width": 1200, "height": 800}).new_page()
        try:
            front.goto(f"{hive.url}/?hours=1")
            expect(front.locator("body")).to_have_attribute("data-live", "1")
            expect(front.locator("#timeline")).to_contain_text("no turns in this window")
            lane = front.locator('#timeline g.lane[data-agent="alice"]')
            try:
                sent = time.monotonic()
                hive.op("send", to="alice", body="summarise the open issues")
                model_server.wait_for(lambda reqs: any(r.main for r in reqs), 60)
                asked = time.monotonic()
                # Running: a mark in the running colour, reaching the window's end.
                running = lane.locator("rect.mark.running")
                expect(running).to_have_count(1)
                assert running.get_attribute("fill") == COLORS["running"]
                released = time.monotonic()
            finally:
                gate.set()
            ended = lane.locator('rect.mark.ended[data-outcome="ok"]')
            expect(ended).to_have_count(1)
            seen = time.monotonic()
            expect(lane.locator("rect.mark.running")).to_have_count(0)
            # Its length is what claude ran: at least the model's stall, at most the wait.
            took = _num(ended, "data-end") - _num(ended, "data-start")
            assert released - asked - 0.001 <= took <= seen - sent
            # Its cost is what the budgets counted for it.
            spent = hive.op("spend")
            usd = next(r for r in spent["agents"] if r["agent"] == "alice")["all_time"]["usd"]
            assert usd > 0 and _num(ended, "data-cost") == pytest.approx(usd)
            assert _num(lane, "data-cost") == pytest.approx(usd)

            # The agent page, repainted live at the turn's end: 4,200 of 10,000 tokens.
            expect(gauge).to_have_attribute("data-usage", "0.42")
            used = gauge.locator("rect.used")
            assert _num(used, "width") == pytest.approx(0.42 * GAUGE_WIDTH, abs=0.01)
            assert used.get_attribute("fill") == OK
            expect(gauge.locator("text.value")).to_have_text("42%")
            expect(page.locator("#compact-rule")).to_contain_text("used 42% (its own: not yet)")
            budget = page.locator('#agent-budget g.scope[data-scope="alice"]')
            expect(budget.locator('g.meter[data-key="usd_per_day"]')).to_contain_text(
                f"{money(usd)} today, no limit"
            )
            screenshot(page, "agent-gauges.png")

            # A second turn: 70%, amber (past the agent's own threshold, short of 90%).
            hive.op("send", to="alice", body="and now?")
            expect(gauge).to_have_attribute("data-usage", "0.7")
            assert gauge.locator("rect.used").get_attribute("fill") == WARN
            expect(page.locator("#compact-rule")).to_contain_text("used 70% (its own: allowed now)")
            expect(lane).to_have_attribute("data-turns", "2")
            # Seconds apart in an hour, both ok: one mark that says two (or two marks).
            drawn = lane.locator("rect.mark.ended").evaluate_all(
                "els => els.reduce((n, e) => n + Number(e.dataset.turns || 1), 0)"
            )
            assert drawn == 2
        finally:
            front.context.close()


def _meter(page: Page, where: str, scope: str, key: str) -> Locator:
    return page.locator(f'{where} g.scope[data-scope="{scope}"] g.meter[data-key="{key}"]')


def _bar(meter: Locator) -> float:
    return _num(meter.locator("rect.spent"), "width")


def test_budget_bars_follow_spend_and_limits_live(tmp_path: Path, page: Page) -> None:
    seed_home(
        tmp_path,
        {
            "alice": AgentConfig.model_validate({"budget": {"usd_per_day": 1.0}}),
            "bob": AgentConfig(),
        },
        hive_toml=HIVE_TOML,
    )
    with live_hive(tmp_path) as hive:
        _turn_end(hive, "alice", "ok", 10, 0.5)
        page.goto(f"{hive.url}/spend")
        expect(page.locator("body")).to_have_attribute("data-live", "1")
        alice = _meter(page, "#budget-bars", "alice", "usd_per_day")
        assert _bar(alice) == pytest.approx(BAR_WIDTH / 2)  # $0.50 of $1.00
        expect(alice).to_contain_text("$0.50 today of $1.00")
        expect(page.locator('#budget-bars g.scope[data-scope="*"]')).to_contain_text("whole hive")
        expect(page.locator("#no-limits")).to_have_text("No limits: bob.")

        # Spend recorded: past the limit, the bar is full, red, and the agent held.
        _turn_end(hive, "alice", "ok", 10, 0.75)
        expect(alice).to_contain_text("$1.25 today of $1.00 (×1.25)")
        assert _bar(alice) == pytest.approx(BAR_WIDTH)
        held = page.locator('#budget-bars g.scope[data-scope="alice"]')
        expect(held).to_have_attribute("data-held", "alice: $1.25 of its $1.00 daily limit")
        expect(held.locator("text.held")).to_contain_text("held")
        screenshot(page, "budget-bars.png")

        # A limit raised: a quarter of the new one, no longer held.
        hive.op("budget_set", scope="alice", limits={"usd_per_day": 5.0})
        expect(alice).to_contain_text("$1.25 today of $5.00")
        assert _bar(alice) == pytest.approx(BAR_WIDTH / 4)
        expect(held).not_to_have_attribute("data-held", "alice: $1.25 of its $1.00 daily limit")
        expect(held.locator("text.held")).to_have_count(0)

        # The whole hive's limit holds every agent: bob, with no limit of his own, is shown.
        hive.op("budget_set", scope="*", limits={"usd_per_day": 1.0})
        bob = page.locator('#budget-bars g.scope[data-scope="bob"]')
        expect(bob).to_have_attribute("data-held", "the whole hive: $1.25 of its $1.00 daily limit")
        expect(page.locator("#no-limits")).to_have_count(0)

        # The agent page: its own bar, and the hive's (which holds it), live on spend.
        page.goto(f"{hive.url}/agents/alice")
        expect(page.locator("body")).to_have_attribute("data-live", "1")
        own = _meter(page, "#agent-budget", "alice", "usd_per_day")
        assert _bar(own) == pytest.approx(NARROW.bar / 4)
        expect(_meter(page, "#agent-budget", "*", "usd_per_day")).to_contain_text(
            "$1.25 today of $1.00"
        )
        _turn_end(hive, "alice", "ok", 10, 1.25)
        expect(own).to_contain_text("$2.50 today of $5.00")
        assert _bar(own) == pytest.approx(NARROW.bar / 2)
