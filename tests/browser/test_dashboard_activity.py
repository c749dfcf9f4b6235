"""The activity page: the feed, live over SSE, filters, paging and a thread's conversation."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from hyperhive.config import AgentConfig
from hyperhive.core.dashboard.activity import PAGE
from hyperhive.permissions import ToolGroup
from tests.browser.conftest import live_hive
from tests.support.hive import seed_home

pytestmark = pytest.mark.timeout(120)

HIVE_TOML = 'runtime = "unsandboxed"\ndashboard_port = 0\ndashboard_auth = "loopback"\n'
TREE = {"queen": None, "alice": "queen", "bob": "queen"}


def seed(home: Path) -> None:
    configs = {name: AgentConfig() for name in TREE}
    configs["queen"] = AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))
    seed_home(home, configs, TREE, hive_toml=HIVE_TOML)


def test_the_feed_follows_the_hive_live_and_filters(tmp_path: Path, page: Page) -> None:
    seed(tmp_path)
    with live_hive(tmp_path) as hive:
        hello = hive.as_agent("alice", "send", to="bob", body="build is red")
        hive.as_agent("bob", "send", to="alice", body="on it", in_reply_to=hello["id"])
        page.goto(f"{hive.url}/activity")
        expect(page.locator("body")).to_have_attribute("data-live", "1")
        items = page.locator("#feed .feed-item")
        expect(items).to_have_count(2)
        expect(items.first).to_contain_text("bob → alice")
        expect(items.first).to_contain_text(f"re #{hello['id']}")
        expect(page.locator("[data-count=waiting]")).to_contain_text("0 approvals")

        # Arriving while the page is open: a message between two agents, then an approval.
        hive.as_agent("alice", "send", to="bob", body="fixed, thanks")
        expect(items).to_have_count(3)
        expect(items.first).to_contain_text("fixed, thanks")
        asked = hive.as_agent("queen", "request_init_config", name="scout", config="")
        expect(page.locator("#feed .feed-item.kind-approval")).to_have_count(1)
        expect(items.first).to_contain_text(f"approval #{asked['approval_id']} asked")
        expect(page.locator("[data-count=waiting]")).to_contain_text("1 approvals")
        hive.op("deny", approval_id=asked["approval_id"], reason="not now")
        expect(page.locator("#feed .feed-item.kind-approval")).to_have_count(2)
        expect(items.first).to_contain_text("denied")

        page.select_option("select[name=kind]", "approval")
        page.click("#activity-filter button")
        expect(page).to_have_url(f"{hive.url}/activity?agent=&kind=approval")
        expect(items).to_have_count(2)
        page.goto(f"{hive.url}/activity?agent=queen")
        # Its approval, asked and denied, and the notice of the denial it was sent.
        expect(page.locator("#feed .feed-item.kind-approval")).to_have_count(2)
        expect(page.locator("#feed .feed-item.kind-message")).to_have_count(1)
        expect(page.locator("#feed .feed-item.kind-message")).to_contain_text("→ queen")
        page.goto(f"{hive.url}/activity?agent=bob&kind=message")
        expect(items).to_have_count(3)

        # One thread, across agents.
        page.locator(f"#feed [data-message='{hello['id']}'] a.thread-link").click()
        conversation = page.locator("#conversation .msg")
        expect(conversation).to_have_count(2)
        expect(conversation.nth(0)).to_contain_text("alice → bob")
        expect(conversation.nth(1)).to_contain_text("on it")
        expect(conversation.nth(1)).to_have_attribute("style", "--depth: 1")


def test_the_feed_pages_by_id(tmp_path: Path, page: Page) -> None:
    seed(tmp_path)
    with live_hive(tmp_path) as hive:
        for i in range(PAGE + 5):
            hive.as_agent("alice", "send", to="bob", body=f"note {i}")
        page.goto(f"{hive.url}/activity")
        items = page.locator("#feed .feed-item")
        expect(items).to_have_count(PAGE)
        expect(items.first).to_contain_text(f"note {PAGE + 4}")
        page.click("a.older")
        expect(items).to_have_count(5)
        expect(items.last).to_contain_text("note 0")
        expect(page.locator("a.older")).to_have_count(0)
        # Repainted live, an older page keeps its cursor.
        expect(page.locator("body")).to_have_attribute("data-live", "1")
        page.evaluate(
            "window.repaints = 0;"
            "document.addEventListener('hive:refreshed', () => { window.repaints += 1; })"
        )
        hive.as_agent("bob", "send", to="alice", body="newest")
        page.wait_for_function("window.repaints > 0")
        expect(items).to_have_count(5)
        expect(items.first).to_contain_text("note 4")
