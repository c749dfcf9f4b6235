"""The agent page's interrupt: a running turn ends, the operator's text reaches its model."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from hyperhive.config import AgentConfig
from tests.browser.conftest import live_hive
from tests.support.hive import agent_env, seed_home
from tests.support.model_server import ModelServer, Stall, text

pytestmark = pytest.mark.timeout(120)


def test_agent_page_interrupts_a_running_turn_with_the_operators_text(
    tmp_path: Path, page: Page, claude_bin: Path, model_server: ModelServer
) -> None:
    gate = threading.Event()
    model_server.set_script(
        [Stall(release=gate, then=text("never seen")), text("switching now"), text("redone")]
    )
    seed_home(
        tmp_path,
        {"alice": AgentConfig(env=agent_env(model_server.url))},
        hive_toml='runtime = "unsandboxed"\ndashboard_port = 0\ndashboard_auth = "loopback"\n',
    )
    with live_hive(tmp_path, claude_bin) as hive:
        try:
            page.goto(f"{hive.url}/agents/alice")
            expect(page.locator(".agent-head .badge.running")).to_be_visible()
            # Nothing running: the button is refused, and says why.
            page.click("#btn-interrupt")
            result = page.locator("#interrupt output.result")
            expect(result).to_contain_text("not running a turn")
            expect(result).to_have_class("result refused")

            hive.op("send", to="alice", body="the long task")
            assert model_server.wait_for(lambda reqs: any(r.main for r in reqs), 60)
            expect(page.locator("#turn-state")).to_have_attribute("data-turn", "thinking")
            page.fill("#interrupt input[name=tell]", "do the short one first")
            page.click("#btn-interrupt")
            expect(result).to_contain_text("turn interrupted; your text is in its session")

            told = model_server.wait_for(lambda reqs: sum(r.main for r in reqs) >= 2, 60)
            assert "do the short one first" in json.dumps([r.messages for r in told if r.main][1])
            stream = page.locator("#stream")
            expect(stream).to_contain_text("interrupted by the operator: do the short one first")
            expect(stream).to_contain_text("into the running turn: do the short one first")
            expect(stream).to_contain_text("switching now", timeout=60_000)
            expect(stream).to_contain_text("turn ended: interrupted")
        finally:
            gate.set()
