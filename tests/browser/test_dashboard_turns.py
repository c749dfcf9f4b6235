"""The Turns tab and a turn's page in a real browser, with the real claude against the
scripted model: a running turn's page shows its steps as they come and stays readable
once it ends; the list shows the turn with its tools, cost and outcome, and filters."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from hyperhive.config import AgentConfig
from tests.browser.conftest import live_hive, screenshot
from tests.support.hive import agent_env, seed_home
from tests.support.model_server import ModelServer, Stall, Usage, text, tool_call
from tests.support.procs import wait_until

pytestmark = pytest.mark.timeout(180)

CALL = Usage(input_tokens=50_800, output_tokens=5)
CALL_USD = (CALL.input_tokens * 3 + CALL.output_tokens * 15) / 1e6


def test_a_running_turn_is_live_then_kept_and_listed_with_filters(
    tmp_path: Path, page: Page, model_server: ModelServer, claude_bin: Path
) -> None:
    reply = Stall(then=text("the jam is marmalade", CALL))
    model_server.set_script(
        [tool_call("mcp__bash__run", {"cmd": "echo hello-quince", "wait_seconds": 30}, CALL), reply]
    )
    config = AgentConfig.model_validate(
        {"env": agent_env(model_server.url), "model": "claude-sonnet-4-5-20250929"}
    )
    seed_home(
        tmp_path,
        {"alice": config},
        hive_toml='runtime = "unsandboxed"\ndashboard_port = 0\n',
    )
    with live_hive(tmp_path, claude_bin) as hive:
        wait_until(lambda: "alice" in hive.host.agents, 60, "alice active")
        token = (tmp_path / "run" / "dashboard-token").read_text().strip()
        hive.op("send", to="alice", body="what jam?")
        # The second model call is held: the turn is running, its tool call recorded.
        model_server.wait_for(lambda rs: sum(r.main for r in rs) >= 2, 60)
        [running] = hive.op("turns_list", agent="alice")
        assert running["outcome"] is None

        page.goto(f"{hive.url}/login?next=/turns/{running['id']}")
        page.locator("input[name=token]").fill(token)
        page.locator("button[type=submit]").click()
        expect(page.locator("#turn-outcome")).to_have_text("running")
        call = page.locator("#replay .step-tool_use")
        expect(call).to_have_count(1)
        expect(call.locator("summary").first).to_contain_text("mcp__bash__run")
        expect(page.locator("body")).to_have_attribute("data-turn-live", "1")
        # Folded: the input shows once the call is opened, the result once it is.
        call.locator("summary").first.click()
        expect(call.locator("pre.input")).to_contain_text("echo hello-quince")
        call.locator("details.tool-result summary").click()
        expect(call.locator("pre.result")).to_contain_text("hello-quince")
        screenshot(page, "turn-running.png")

        reply.release.set()  # the model answers: the turn ends while the page is open
        expect(page.locator("#turn-outcome")).to_have_text("ok", timeout=60_000)
        expect(page.locator("body")).to_have_attribute("data-turn-done", "1")
        expect(page.locator("#replay .step-text")).to_have_text("the jam is marmalade")
        expect(page.locator("#turn-summary .cost")).to_have_text(f"${2 * CALL_USD:.4f}")
        expect(call.locator("pre.result")).to_be_visible()  # what was opened stays open

        page.goto(f"{hive.url}/agents/alice/turns")
        row = page.locator(f'#turns-table tr[data-turn="{running["id"]}"]')
        expect(row.locator(".tools")).to_have_text("mcp__bash__run")
        expect(row.locator(".cost")).to_have_text(f"${2 * CALL_USD:.4f}")
        expect(row.locator(".badge")).to_have_text("ok")
        expect(row.locator(".wake")).to_have_text("mail from operator")
        screenshot(page, "turns.png")
        # Filters: by outcome (none failed), by text in a tool result.
        page.goto(f"{hive.url}/agents/alice/turns?outcome=error")
        expect(page.locator("#turns-table tbody tr[data-turn]")).to_have_count(0)
        page.goto(f"{hive.url}/agents/alice/turns?q=hello-quince")
        expect(page.locator("#turns-table tbody tr[data-turn]")).to_have_count(1)
        page.goto(f"{hive.url}/agents/alice/turns?q=nowhere-to-be-found")
        expect(page.locator("#turns-table tbody tr[data-turn]")).to_have_count(0)
        row_link = f"{hive.url}/agents/alice/turns?tool=mcp__bash__run"
        page.goto(row_link)
        page.locator(f'#turns-table tr[data-turn="{running["id"]}"] a').click()
        expect(page).to_have_url(f"{hive.url}/turns/{running['id']}")
