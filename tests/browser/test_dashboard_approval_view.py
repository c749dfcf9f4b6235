"""An approval shows what it will do: parent, tool groups, the exact ``--tools`` /
``--allowedTools`` and the agent.toml with defaults filled in — in the JSON API, on the
page and in ``hivectl approvals show``."""

from __future__ import annotations

import tomllib
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from hyperhive.config import AgentConfig
from hyperhive.permissions import ToolGroup
from tests.browser.conftest import live_hive
from tests.support.hive import seed_home
from tests.support.procs import hivectl
from tests.unit.test_effective import argv_values

pytestmark = pytest.mark.timeout(90)

HIVE_TOML = 'runtime = "unsandboxed"\ndashboard_port = 0\ndashboard_auth = "loopback"\n'
TREE = {"queen": None, "alice": "queen"}


def seed(home: Path) -> None:
    configs = {
        "queen": AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT)),
        "alice": AgentConfig(),
    }
    seed_home(home, configs, TREE, hive_toml=HIVE_TOML)


def test_an_init_with_an_empty_config_shows_the_child_it_will_make(
    tmp_path: Path, page: Page
) -> None:
    seed(tmp_path)
    with live_hive(tmp_path) as hive:
        asked = hive.as_agent("queen", "request_init_config", name="gina", config="")
        approval = asked["approval_id"]
        default_tools, default_allowed = argv_values(AgentConfig())

        shown = httpx.get(f"{hive.url}/api/approvals/{approval}").json()
        effective = shown["effective"]
        assert effective["agent"] == "gina" and effective["parent"] == "queen"
        assert effective["tool_groups"] == [g.value for g in ToolGroup.AGENT_DEFAULT]
        assert effective["tools_arg"] == default_tools
        assert effective["allowed_tools_arg"] == default_allowed
        assert "mcp__bash__run" in effective["allowed_tools_arg"]  # execution is a default
        assert tomllib.loads(effective["toml"])["subagent_model"] == "haiku"

        page.goto(f"{hive.url}/approvals")
        card = page.locator(f'article[data-approval="{approval}"]')
        expect(card).to_contain_text("every setting is a default")
        expect(card.locator(".eff-parent")).to_have_text("queen")
        expect(card.locator(".eff-tools")).to_have_text(default_tools)
        expect(card.locator(".eff-allowed")).to_have_text(default_allowed)
        expect(card).not_to_contain_text('"config": ""')  # the raw request is gone

        cli = hivectl(tmp_path, "approvals", "show", str(approval)).stdout
        assert "approving gives gina:" in cli
        assert "parent          queen" in cli
        assert f"--tools         {default_tools}" in cli
        assert f"--allowedTools  {default_allowed}" in cli
        assert 'subagent_model = "haiku"' in cli


def test_an_apply_shows_the_diff_and_the_agent_it_will_make(
    tmp_path: Path, claude_bin: Path
) -> None:
    seed(tmp_path)
    with live_hive(tmp_path, claude_bin, idle_host=True) as hive:
        proposed = hive.op(
            "perms_set", agent="alice", tool_groups=["messaging", "execution"], capabilities=[]
        )
        shown = hive.op("approval_show", approval_id=proposed["approval_id"])
        assert "+tool_groups" in shown["diff"]
        effective = shown["effective"]
        assert effective["parent"] == "queen"
        assert effective["tool_groups"] == ["messaging", "execution"]
        wanted = AgentConfig(tool_groups=[ToolGroup.MESSAGING, ToolGroup.EXECUTION])
        assert (effective["tools_arg"], effective["allowed_tools_arg"]) == argv_values(wanted)
        assert "mcp__bash__run" in effective["allowed_tools_arg"]
        assert "bash" in effective["mcp_servers"]
        cli = hivectl(tmp_path, "approvals", "show", str(proposed["approval_id"]), "--json")
        assert '"effective"' in cli.stdout


def test_a_stored_request_that_no_longer_reads_shows_why_and_is_only_denied(
    tmp_path: Path, page: Page
) -> None:
    seed(tmp_path)
    with live_hive(tmp_path) as hive:
        store = hive.coord.store.approvals
        damaged = hive.call(
            store.create, "apply_commit", "queen", "alice", {"agent": "alice", "commit": "abc"}
        )
        shown = httpx.get(f"{hive.url}/api/approvals/{damaged}").json()
        assert shown["payload"]["kind"] == "stored" and shown["diff"] is None
        assert shown["payload"]["problem"] == "config: Field required"

        page.goto(f"{hive.url}/approvals")
        card = page.locator(f'article[data-approval="{damaged}"]')
        expect(card.locator(".stored-problem")).to_have_text("config: Field required: deny it.")
        expect(card).to_contain_text('"commit": "abc"')
        refused = httpx.post(f"{hive.url}/api/approvals/{damaged}/approve", json={})
        assert refused.status_code == 409 and "deny it instead" in refused.text
        denied = httpx.post(f"{hive.url}/api/approvals/{damaged}/deny", json={"reason": "no"})
        assert denied.status_code == 200 and denied.json()["state"] == "denied"
