"""The waiting count in every page's nav: pending approvals plus open questions, live."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from hyperhive.config import AgentConfig
from hyperhive.permissions import ToolGroup
from tests.browser.conftest import live_hive
from tests.support.hive import seed_home

pytestmark = pytest.mark.timeout(90)

HIVE_TOML = 'runtime = "unsandboxed"\ndashboard_port = 0\ndashboard_auth = "loopback"\n'
TREE = {"queen": None, "alice": "queen", "bob": None}


def seed(home: Path) -> None:
    configs = {name: AgentConfig() for name in TREE}
    configs["queen"] = AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))
    seed_home(home, configs, TREE, hive_toml=HIVE_TOML)


def test_every_page_shows_what_waits_and_it_follows_the_hive_live(
    tmp_path: Path, claude_bin: Path, page: Page
) -> None:
    seed(tmp_path)
    with live_hive(tmp_path, claude_bin, idle_host=True) as hive:
        asked = hive.as_agent("bob", "ask_operator", question="which branch?")
        for path in (
            "/",
            "/tree",
            "/inbox",
            "/approvals",
            "/agents/alice",
            "/agents/alice/permissions",
        ):
            page.goto(f"{hive.url}{path}")
            badge = page.locator("#waiting .badge.waiting")
            expect(badge).to_have_text("1 waiting")
            expect(badge).to_have_attribute("href", "/inbox")  # only a question waits

        page.goto(hive.url)
        expect(page.locator("body")).to_have_attribute("data-live", "1")
        badge = page.locator("#waiting .badge.waiting")
        init = hive.as_agent("queen", "request_init_config", name="gina", config="")
        expect(badge).to_have_text("2 waiting")
        expect(badge).to_have_attribute("href", "/approvals")
        expect(badge).to_have_attribute("title", "waiting for you: 1 approval, 1 question")

        # Each way a loose end stops waiting lowers the count without a reload.
        hive.op("answer_question", question_id=asked["question_id"], answer="main")
        expect(badge).to_have_text("1 waiting")
        second = hive.as_agent("alice", "ask_operator", question="may I?")
        expect(badge).to_have_text("2 waiting")
        hive.op("cancel_loose_end", kind="question", row_id=second["question_id"])
        expect(badge).to_have_text("1 waiting")
        hive.as_agent("queen", "cancel_loose_end", kind="approval", row_id=init["approval_id"])
        expect(badge).to_have_text("0 waiting")
        perms = hive.op("perms_set", agent="alice", tool_groups=["messaging"], capabilities=[])
        expect(badge).to_have_text("1 waiting")
        hive.op("deny", approval_id=perms["approval_id"], reason="not now")
        expect(badge).to_have_text("0 waiting")
        expect(badge).not_to_have_class("some")


def test_the_login_page_shows_no_count(tmp_path: Path, page: Page) -> None:
    """Counts are the operator's business: nothing of the hive before logging in."""
    seed_home(
        tmp_path,
        {"queen": AgentConfig()},
        {"queen": None},
        hive_toml='runtime = "unsandboxed"\ndashboard_port = 0\n',
    )
    with live_hive(tmp_path) as hive:
        hive.as_agent("queen", "ask_operator", question="anyone there?")
        page.goto(hive.url)
        expect(page.locator("input[name=token]")).to_be_visible()
        expect(page.locator("#waiting")).to_have_count(0)
