"""The spend page in a real browser: figures per agent, the server-rendered chart, a
held agent shown and resumed by raising its limit from the page (token and CSRF
as every dashboard form)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from hyperhive.config import AgentConfig
from tests.browser.conftest import live_hive, screenshot
from tests.support.hive import seed_home
from tests.support.spend import reported

pytestmark = pytest.mark.timeout(90)


def _spend(usd: float, tokens: int, kind: str = "turn") -> dict[str, object]:
    return reported(usd, tokens, kind)


def test_the_spend_page_shows_spend_and_raising_a_limit_resumes_the_agent(
    tmp_path: Path, page: Page
) -> None:
    seed_home(
        tmp_path,
        {"alice": "budget = { usd_per_day = 1.0 }\n", "bob": AgentConfig()},
        hive_toml='runtime = "unsandboxed"\ndashboard_port = 0\n',  # token auth
    )
    with live_hive(tmp_path) as hive:
        hive.as_agent("alice", "turn_end", outcome="ok", spend=_spend(1.25, 5000))
        hive.as_agent("bob", "record_spend", spend=_spend(0.5, 700, "subagent"))
        token = (tmp_path / "run" / "dashboard-token").read_text().strip()

        # Same rules as every form: no token, no page; a POST without the CSRF echo is refused.
        with httpx.Client(base_url=hive.url) as http:
            assert http.get("/spend", follow_redirects=False).status_code in (303, 401)
            bare = http.post(
                "/api/budget",
                json={"scope": "alice", "usd_per_day": "9"},
                headers={"Authorization": f"Bearer {token}", "Origin": "https://evil.example"},
            )
            assert bare.status_code == 403
        assert hive.op("budget")["scopes"][1]["overrides"] == {}

        page.goto(f"{hive.url}/login?next=/spend")
        page.locator("input[name=token]").fill(token)
        page.locator("button[type=submit]").click()
        expect(page).to_have_url(f"{hive.url}/spend")
        expect(page.locator("body")).to_have_attribute("data-live", "1")

        alice = page.locator('#spend-table tr[data-agent="alice"]')
        expect(alice.locator(".all-time")).to_contain_text("$1.2500")
        expect(alice.locator(".all-time")).to_contain_text("5,000 tok")
        expect(alice.locator(".badge.over")).to_be_visible()
        expect(page.locator('#spend-table tr[data-agent="bob"] .today')).to_contain_text("$0.5000")
        expect(page.locator("#spend-table tfoot .all-time")).to_contain_text("$1.7500")
        expect(page.locator("#top-spenders")).to_have_text("Top spenders: alice, bob")
        # The chart is inline SVG from the server: a line per agent, nothing fetched.
        chart = page.locator("#spend-chart svg.spend-chart")
        expect(chart.locator("g.series")).to_have_count(2)
        expect(chart.locator('g.series[data-agent="alice"] circle')).to_have_count(1)
        expect(page.locator('#budget-table tr[data-scope="alice"]')).to_contain_text(
            "over: alice: $1.25 of its $1.00 daily limit"
        )
        screenshot(page, "spend.png")

        held = hive.op("agents")
        assert next(a for a in held if a["name"] == "alice")["over_budget"]

        form = page.locator("#budget-form")
        form.locator("select[name=scope]").select_option("alice")
        form.locator("input[name=usd_per_day]").fill("abc")
        form.locator("button[type=submit]").click()
        expect(page.locator("#flash")).to_contain_text("'abc' is not a number")

        form.locator("input[name=usd_per_day]").fill("5")
        form.locator("button[type=submit]").click()
        expect(page.locator("#flash")).to_contain_text("budget saved")
        # Live: the page repaints from the SSE event, the agent is no longer held.
        expect(alice.locator(".badge.over")).to_have_count(0)
        expect(
            page.locator('#budget-table tr[data-scope="alice"] [data-key="usd_per_day"]')
        ).to_contain_text("$5.00")
        assert next(a for a in hive.op("agents") if a["name"] == "alice")["over_budget"] is None
        assert hive.op("budget")["scopes"][1]["overrides"] == {"usd_per_day": 5.0}

        # A new spend arriving while the page is open shows up without a reload.
        hive.as_agent("bob", "turn_end", outcome="ok", spend=_spend(2.0, 10))
        expect(page.locator('#spend-table tr[data-agent="bob"] .today')).to_contain_text("$2.5000")
        expect(page.locator("#top-spenders")).to_have_text("Top spenders: bob, alice")
