"""The documentation's screenshots, taken from a live hive (run by ``scripts/screenshots``).

A hive of five agents runs in a temporary home: the coordinator, the dashboard and
a real agent host, every agent's claude the real CLI answered by the scripted model
of the tests (``tests/support/model_server.py``). The operator asks the queen for
release notes; she tasks her children, they answer, she reports, asks the operator
a question and asks to spawn a reviewer (an approval). A second agent host dials
in over the network link. Then Debian's Chromium, driven by Playwright, takes the
pages: Activity, Tree, an agent mid-turn, Approvals, an agent's Permissions, Spend
and Hosts.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import threading
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, live_hive  # noqa: E402
from tests.support.hive import agent_env, seed_home  # noqa: E402
from tests.support.hostlink import link_url, registered, write_credential  # noqa: E402
from tests.support.model_server import (  # noqa: E402
    Answer,
    ModelServer,
    Stall,
    Usage,
    text,
    tool_call,
)
from tests.support.procs import wait_until  # noqa: E402
from tests.support.surfaces import until  # noqa: E402

from hyperhive.agent.host import resolve_claude_bin  # noqa: E402
from hyperhive.config import AgentConfig  # noqa: E402
from hyperhive.netlink.dialer import LinkTarget  # noqa: E402
from hyperhive.permissions import ToolGroup  # noqa: E402
from hyperhive.protocol import HostCapacity, LinkHeartbeatReq  # noqa: E402

TREE: dict[str, str | None] = {
    "queen": None,
    "scout": "queen",
    "writer": "queen",
    "editor": "writer",
    "ops": None,
}
# Priced like a real model by claude itself, so the Spend page shows dollars.
MODEL = "claude-sonnet-4-5"
BIG = Usage(input_tokens=18_000, output_tokens=1_200, cache_read_input_tokens=42_000)
WAIT_S = 120.0
HIVE_TOML = (
    'runtime = "unsandboxed"\ndashboard_port = 0\ndashboard_auth = "loopback"\n'
    'name = "release-crew"\nhostlink = { listen = "127.0.0.1:0" }\n'
    "[budget]\nusd_per_day = 25.0\n"
)
REVIEWER = 'tool_groups = ["messaging", "meta", "inbox", "execution", "web_tools"]\n'


def send(to: str, body: str) -> Answer:
    return tool_call("mcp__hyperhive__send", {"to": to, "body": body}, BIG)


class Crew:
    """The scripted model: the next reply of whichever agent is asking (by its prompt)."""

    def __init__(self, mid_turn: threading.Event) -> None:
        self.lock = threading.Lock()
        self.plans: dict[str, deque[Answer]] = defaultdict(deque)
        self.plans["queen"].extend(
            [
                send("scout", "What changed since last week's release? Commits and issues."),
                send("writer", "Draft this week's release notes; scout will send the changes."),
                text("Asked scout and writer; I will report when the draft is ready.", BIG),
                send(
                    "operator",
                    "The release notes draft is ready in writer's workspace: 14 changes, "
                    "two of them breaking (the config file moved, one flag renamed).",
                ),
                tool_call(
                    "mcp__hyperhive__ask_operator",
                    {"question": "Publish the notes today, or hold them for Monday's release?"},
                    BIG,
                ),
                tool_call(
                    "mcp__hyperhive__request_init_config",
                    {"name": "reviewer", "config": REVIEWER},
                    BIG,
                ),
                text("Reported; waiting for the operator's answer and the reviewer.", BIG),
            ]
        )
        self.plans["scout"].extend(
            [
                tool_call("mcp__hyperhive__set_status", {"text": "reading the changelog"}, BIG),
                send("queen", "14 changes since last week: 9 fixes, 3 features, 2 breaking."),
                text("Sent the list of changes to queen.", BIG),
            ]
        )
        self.plans["writer"].extend(
            [
                send("editor", "Please proofread the draft of this week's release notes."),
                send("queen", "Draft done: notes/release.md, 14 entries, breaking changes first."),
                text("Draft written and sent for proofreading.", BIG),
            ]
        )
        self.plans["editor"].extend(
            [
                send("writer", "Proofread: two typos fixed, the breaking changes read well."),
                text("Proofreading done.", BIG),
            ]
        )
        self.mid_turn = mid_turn

    def arm_mid_turn(self) -> None:
        """The editor's next turn runs a command, then stays mid-turn until released."""
        with self.lock:
            self.plans["editor"].extend(
                [
                    tool_call(
                        "mcp__bash__run",
                        {"cmd": "grep -c BREAKING notes/release.md", "wait_seconds": 5},
                        BIG,
                    ),
                    Stall(release=self.mid_turn, then=text("Both breaking changes check.", BIG)),
                ]
            )

    def __call__(self, body: dict[str, Any]) -> Answer:
        found = re.search(r"You are (\w[\w-]*), an agent", json.dumps(body.get("system", "")))
        agent = found.group(1) if found else "?"
        with self.lock:
            plan = self.plans[agent]
            return plan.popleft() if plan else text("Noted.", BIG)


def seed(home: Path, model_url: str) -> None:
    env = agent_env(model_url)
    base = AgentConfig(env=env, model=MODEL)
    configs = {name: base for name in TREE}
    configs["queen"] = base.model_copy(update={"tool_groups": list(ToolGroup.MANAGER_DEFAULT)})
    configs["writer"] = base.model_copy(
        update={"tool_groups": [*ToolGroup.AGENT_DEFAULT, ToolGroup.LIFECYCLE]}
    )
    seed_home(home, configs, TREE, hive_toml=HIVE_TOML)


def shoot(page: Page, out: Path, name: str) -> None:
    expect(page.locator("body")).to_have_attribute("data-live", "1")
    page.wait_for_timeout(300)  # let the last live fragment paint; only a picture waits on it
    page.screenshot(path=str(out / f"{name}.png"), full_page=True)
    print(f"screenshots: {out / f'{name}.png'}", flush=True)  # noqa: T201


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/screenshots", description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    claude_bin = Path(resolve_claude_bin(None))
    mid_turn = threading.Event()
    crew = Crew(mid_turn)
    with (
        tempfile.TemporaryDirectory(prefix="hh-shots-") as tmp,
        ModelServer(crew) as model,
    ):
        home = Path(tmp)
        seed(home, model.url)
        with live_hive(home, claude_bin) as hive, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            context.set_default_timeout(WAIT_S * 1000)
            expect.set_options(timeout=WAIT_S * 1000)
            page = context.new_page()
            try:
                _story(hive, page, out, crew)
            finally:
                mid_turn.set()
                context.close()
                browser.close()
    return 0


def _story(hive: Any, page: Page, out: Path, crew: Crew) -> None:
    running = lambda: all(hive.coord.hostlink.running(n) for n in TREE)  # noqa: E731
    hive.call(until, running, WAIT_S)
    hive.op("send", to="queen", body="Please get this week's release notes written.")
    # The story is over when the queen has asked for the reviewer and every turn ended.
    wait_until(lambda: hive.op("approvals"), WAIT_S, "the queen's approval")
    idle = lambda: all(a["turn_state"] == "idle" for a in hive.op("agents"))  # noqa: E731
    wait_until(idle, WAIT_S, "every turn over")

    made = hive.op("hosts_add", name="rack2")
    cred = write_credential(hive.paths.home / "creds" / "rack2", made["credential"])
    target = LinkTarget(link_url(hive.paths), "rack2", cred)
    capacity = HostCapacity(
        claude_slots=8, slots_in_use=3, mem_total=32 << 30, mem_available=19 << 30
    )
    with hive.portal.wrap_async_context_manager(registered(target)) as link:
        hive.call(link.call, LinkHeartbeatReq(cmd="heartbeat", capacity=capacity))
        page.goto(f"{hive.url}/hosts")
        expect(page.locator('[data-host="rack2"]')).to_be_visible()
        shoot(page, out, "hosts")

    page.goto(f"{hive.url}/")
    expect(page.locator("body")).to_contain_text("reviewer")
    shoot(page, out, "activity")
    page.goto(f"{hive.url}/tree")
    expect(page.locator('#tree li.node[data-agent="editor"]')).to_be_visible()
    shoot(page, out, "tree")
    page.goto(f"{hive.url}/approvals")
    expect(page.locator("body")).to_contain_text("reviewer")
    shoot(page, out, "approvals")
    page.goto(f"{hive.url}/agents/writer/permissions")
    expect(page.locator("body")).to_contain_text("--allowedTools")
    shoot(page, out, "permissions")
    page.goto(f"{hive.url}/spend")
    expect(page.locator('#spend-table tr[data-agent="queen"]')).to_be_visible()
    shoot(page, out, "spend")

    page.goto(f"{hive.url}/agents/editor")
    expect(page.locator(".agent-head .badge.running")).to_be_visible()
    crew.arm_mid_turn()
    hive.op("send", to="editor", body="One more pass over the breaking changes, please.")
    expect(page.locator("#turn-state")).to_have_attribute("data-turn", "thinking")
    expect(page.locator("#stream")).to_contain_text("grep -c BREAKING")
    shoot(page, out, "agent-mid-turn")
    crew.mid_turn.set()


if __name__ == "__main__":
    raise SystemExit(main())
