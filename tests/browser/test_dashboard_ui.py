"""The dashboard in a real browser against a real hive: tree, set-parent, permissions,
approvals, the operator's inbox, and an agent page mid-turn."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Locator, Page, Route, expect

from hyperhive.config import AgentConfig
from hyperhive.names import OPERATOR
from hyperhive.permissions import ToolGroup
from tests.browser.conftest import LiveHive, live_hive, screenshot
from tests.support.hive import agent_env, seed_home
from tests.support.model_server import ModelServer, Stall, text

pytestmark = pytest.mark.timeout(120)

HIVE_TOML = 'runtime = "unsandboxed"\ndashboard_port = 0\ndashboard_auth = "loopback"\n'
TREE = {"queen": None, "alice": "queen", "carol": "alice", "bob": None}


def seed(home: Path, env: dict[str, str] | None = None) -> None:
    cfg = AgentConfig(env=env or {})
    configs = {name: cfg for name in TREE}
    configs["queen"] = cfg.model_copy(update={"tool_groups": list(ToolGroup.MANAGER_DEFAULT)})
    seed_home(home, configs, TREE, hive_toml=HIVE_TOML)


def tree_order(page: Page) -> list[tuple[str, str, int]]:
    return [
        (str(n["agent"]), str(n["parent"]), int(n["depth"]))
        for n in page.locator("#tree li.node").evaluate_all(
            "els => els.map(e => ({agent: e.dataset.agent, parent: e.dataset.parent, "
            "depth: e.dataset.depth}))"
        )
    ]


def wait_live(page: Page) -> None:
    """The page's event stream is connected and its live parts caught up with it."""
    expect(page.locator("body")).to_have_attribute("data-live", "1")


def test_tree_renders_roots_first_with_state(
    tmp_path: Path, page: Page, claude_bin: Path, model_server: ModelServer
) -> None:
    gate = threading.Event()
    model_server.set_script([Stall(release=gate, then=text("ok"))])
    seed(tmp_path, agent_env(model_server.url))
    with live_hive(tmp_path, claude_bin) as hive:
        hive.call(hive.coord.agent_state.set_status, "alice", "triaging the backlog")
        hive.as_agent("carol", "send", to=OPERATOR, body="found a bug")
        page.goto(f"{hive.url}/tree")
        expect(page.locator("#tree li.node")).to_have_count(4)
        assert tree_order(page) == [
            ("bob", "", 0),
            ("queen", "", 0),
            ("alice", "queen", 1),
            ("carol", "alice", 2),
        ]
        alice = page.locator('li[data-agent="alice"]')
        expect(alice.locator(".status")).to_have_text("triaging the backlog")
        expect(alice.locator(".badge.running")).to_be_visible()
        expect(alice.locator(".turn")).to_have_attribute("data-turn", "idle")
        expect(page.locator('li[data-agent="carol"] .badge.unread')).to_have_text("✉ 1")
        wait_live(page)
        # A status set and a turn starting repaint without a reload.
        hive.call(hive.coord.agent_state.set_status, "bob", "reviewing")
        expect(page.locator('li[data-agent="bob"] .status')).to_have_text("reviewing")
        try:
            hive.op("send", to="queen", body="plan the week")
            queen = page.locator('li[data-agent="queen"] .turn')
            expect(queen).to_have_attribute("data-turn", "thinking")
            screenshot(page, "tree.png")
            hive.op("agent_kill", agent="bob")
            expect(page.locator('li[data-agent="bob"] .badge.stopped')).to_be_visible()
        finally:
            gate.set()


def test_what_changed_before_the_stream_connected_is_shown_once_it_does(
    tmp_path: Path, page: Page
) -> None:
    """Between the server's render and the event stream's connecting, an event is lost:
    the page fetches every live part once on the stream's hello (here, the agent head too,
    which listens for no hello of its own)."""
    seed(tmp_path)
    with live_hive(tmp_path) as hive:
        held: list[Route] = []
        page.route("**/api/events", lambda route: held.append(route))
        parts = (("/tree", 'li[data-agent="bob"] .status'), ("/agents/bob", "#head-live"))
        for where, part in parts:
            held.clear()
            page.goto(f"{hive.url}{where}")
            for _ in range(300):  # the page asked for its stream: held, not yet open
                if held:
                    break
                page.wait_for_timeout(50)
            assert held, "the page never opened its event stream"
            status = f"changed before {where} connected"
            hive.call(hive.coord.agent_state.set_status, "bob", status)
            held[0].continue_()
            wait_live(page)
            expect(page.locator(part)).to_contain_text(status)


def test_set_parent_moves_the_node_live_in_a_second_tab(tmp_path: Path, browser: Browser) -> None:
    seed(tmp_path)
    with live_hive(tmp_path) as hive:
        first, second = browser.new_context(), browser.new_context()
        try:
            mover, watcher = first.new_page(), second.new_page()
            watcher.goto(f"{hive.url}/tree")
            wait_live(watcher)
            watcher.evaluate("window.__notReloaded = true")
            mover.goto(f"{hive.url}/tree")
            mover.fill("#set-parent input[name=child]", "bob")
            mover.fill("#set-parent input[name=new_parent]", "carol")
            mover.click("#set-parent button[type=submit]")
            expect(mover.locator("#set-parent-result")).to_have_text("moved")
            bob = watcher.locator('li[data-agent="bob"]')
            expect(bob).to_have_attribute("data-parent", "carol")
            expect(bob).to_have_attribute("data-depth", "3")
            assert watcher.evaluate("window.__notReloaded") is True
            assert hive.op("topology")["bob"] == "carol"
            # Empty new_parent promotes to a root, again seen live.
            mover.fill("#set-parent input[name=child]", "alice")
            mover.click("#set-parent button[type=submit]")
            expect(watcher.locator('li[data-agent="alice"]')).to_have_attribute("data-depth", "0")
        finally:
            first.close()
            second.close()


def test_refused_reparents_are_shown_in_words(tmp_path: Path, page: Page) -> None:
    seed(tmp_path)
    with live_hive(tmp_path) as hive:
        page.goto(f"{hive.url}/tree")
        result = page.locator("#set-parent-result")
        for child, parent, words in (
            ("queen", "carol", "would make a cycle"),
            ("alice", "alice", "own parent"),
            ("ghost", "", "ghost"),
        ):
            page.fill("#set-parent input[name=child]", child)
            page.fill("#set-parent input[name=new_parent]", parent)
            page.click("#set-parent button[type=submit]")
            expect(result).to_contain_text(words)
            expect(result).to_have_class("result refused")
        assert hive.op("topology") == TREE


def test_permissions_toggle_shows_the_new_tools_and_saving_asks_for_approval(
    tmp_path: Path, claude_bin: Path, page: Page
) -> None:
    seed(tmp_path)
    with live_hive(tmp_path, claude_bin, idle_host=True) as hive:
        page.goto(f"{hive.url}/agents/alice/permissions")
        tools = page.locator("#tools-arg")
        expect(tools).not_to_contain_text("WebFetch")
        # Each toggle says what it grants, read from the tools' declarations.
        grants = page.locator("label:has(input[value=lifecycle]) .grants")
        expect(grants).to_contain_text("request_init_config, kill, start")
        expect(page.locator("label:has(input[value=forge]) .grants")).to_have_text("create_repo")
        page.check("input[name=group][value=web_tools]")
        expect(tools).to_have_text("Edit,Glob,Grep,Read,Skill,Write,WebFetch,WebSearch")
        expect(page.locator("#allowed-tools-arg")).to_contain_text("WebSearch")
        page.check("input[name=cap][value=read_host_journal]")
        expect(page.locator("#allowed-tools-arg")).to_contain_text("get_host_journal")
        screenshot(page, "permissions.png")
        page.click("#perms button[type=submit]")
        expect(page.locator("#perms-result")).to_contain_text("approval #1 created")
        pending = hive.op("approvals")
        assert [(a["kind"], a["subject"]) for a in pending] == [("apply_commit", "alice")]
        # Unticking every group is refused in words, before anything is saved.
        for box in page.locator("input[name=group]").all():
            box.uncheck()
        expect(page.locator("#perms-result")).to_contain_text("at least one tool group")


def test_approval_in_the_ui_spawns_the_child(
    tmp_path: Path, page: Page, claude_bin: Path, model_server: ModelServer
) -> None:
    seed(tmp_path, agent_env(model_server.url))
    with live_hive(tmp_path, claude_bin) as hive:
        asked = hive.as_agent("queen", "request_init_config", name="scout", config="")
        page.goto(f"{hive.url}/approvals")
        card = page.locator(f'article[data-approval="{asked["approval_id"]}"]')
        expect(card).to_contain_text("init_config")
        expect(card).to_contain_text("by queen")
        card.locator("button.approve").click()
        expect(page.locator("#flash")).to_contain_text(f"#{asked['approval_id']} approved")
        expect(card).to_have_count(0)
        page.goto(f"{hive.url}/tree")
        scout = page.locator('li[data-agent="scout"]')
        expect(scout).to_have_attribute("data-parent", "queen")
        expect(scout.locator(".badge.running")).to_be_visible()
        assert hive.op("topology")["scout"] == "queen"


def test_the_operator_replies_to_an_agents_message(tmp_path: Path, page: Page) -> None:
    seed(tmp_path)
    with live_hive(tmp_path) as hive:
        page.goto(f"{hive.url}/inbox")
        wait_live(page)
        sent = hive.as_agent("alice", "send", to=OPERATOR, body="may I refactor the parser?")
        message = page.locator(f'[data-message="{sent["id"]}"]')
        expect(message).to_contain_text("may I refactor the parser?")
        message.locator("input[name=body]").fill("yes, go ahead")
        message.locator("button[type=submit]").click()
        expect(page.locator("#flash")).to_contain_text("to alice")
        box = hive.op("messages", agent="alice")
        reply = box["inbox"][0]
        assert reply["from"] == OPERATOR and reply["body"] == "yes, go ahead"
        assert reply["in_reply_to"] == sent["id"]
        # The thread repaints with the reply nested under the question.
        expect(page.locator(".thread").first).to_contain_text("yes, go ahead")


def test_questions_are_answered_from_the_inbox(tmp_path: Path, page: Page) -> None:
    seed(tmp_path)
    with live_hive(tmp_path) as hive:
        asked = hive.as_agent("bob", "ask_operator", question="which branch?")
        page.goto(f"{hive.url}/inbox")
        wait_live(page)  # else Playwright may type into the field the catch-up repaint swaps
        question = page.locator(f'[data-question="{asked["question_id"]}"]')
        question.locator("input[name=answer]").fill("main")
        question.locator("button[type=submit]").click()
        expect(page.locator("#flash")).to_contain_text("sent to bob")
        assert hive.op("questions") == []


def _stale_while_typing(page: Page, hive: LiveHive, field: Locator, text: str, body: str) -> None:
    """Type into ``field``, then let news arrive: the inbox goes stale rather than wipe it."""
    field.fill(text)
    hive.as_agent("alice", "send", to=OPERATOR, body=body)
    expect(page.locator("#inbox-live")).to_have_attribute("data-stale", "1")


def test_a_slow_click_on_a_stale_inbox_still_submits(tmp_path: Path, page: Page) -> None:
    # A human's click spans ~100 ms between press and release. The press moves focus off
    # the typed field, which used to let the stale part repaint under the pointer: the
    # release then landed on a new button, no click happened, and the answer was lost.
    seed(tmp_path)
    with live_hive(tmp_path) as hive:
        asked = hive.as_agent("bob", "ask_operator", question="which branch?")
        page.goto(f"{hive.url}/inbox")
        wait_live(page)
        question = page.locator(f'[data-question="{asked["question_id"]}"]')
        _stale_while_typing(page, hive, question.locator("input[name=answer]"), "main", "news")
        button = question.locator("button[type=submit]").bounding_box()
        assert button is not None
        page.mouse.move(button["x"] + button["width"] / 2, button["y"] + button["height"] / 2)
        page.mouse.down()
        page.wait_for_timeout(400)  # a slow hand: time enough for any repaint to land
        page.mouse.up()
        expect(page.locator("#flash")).to_contain_text("sent to bob")
        assert hive.op("questions") == []
        # Released, the part catches up with the news that made it stale.
        expect(page.locator("#inbox-live")).to_contain_text("news")


def test_a_repaint_keeps_what_the_operator_typed_and_did_not_send(
    tmp_path: Path, page: Page
) -> None:
    seed(tmp_path)
    with live_hive(tmp_path) as hive:
        sent = hive.as_agent("carol", "send", to=OPERATOR, body="first question")
        page.goto(f"{hive.url}/inbox")
        wait_live(page)
        reply = page.locator(f'[data-message="{sent["id"]}"] input[name=body]')
        _stale_while_typing(page, hive, reply, "half an answer", "second message")
        page.locator("h1").first.click()  # focus leaves the field: the part repaints
        expect(page.locator("#inbox-live")).to_contain_text("second message")
        expect(page.locator("#inbox-live")).not_to_have_attribute("data-stale", "1")
        expect(reply).to_have_value("half an answer")


def test_agent_page_buttons_compact_ungated_and_destroy(tmp_path: Path, page: Page) -> None:
    seed(tmp_path)
    with live_hive(tmp_path) as hive:
        page.goto(f"{hive.url}/agents/carol")
        expect(page.locator("#compact-rule")).to_contain_text("yours runs at any usage")
        expect(page.locator("#compact-rule")).to_contain_text("allowed above 66%")
        page.click("#btn-compact")
        expect(page.locator("#action-result")).to_contain_text("compaction queued (usage unknown)")
        expect(page.locator("#action-result")).not_to_have_class("result refused")
        page.once("dialog", lambda dialog: dialog.dismiss())
        page.click("button.danger")
        assert "carol" in hive.op("topology")
        page.once("dialog", lambda dialog: dialog.accept())
        page.click("button.danger")
        expect(page.locator("#action-result")).to_contain_text("destroyed")
        assert "carol" not in hive.op("topology")


def test_agent_page_mid_turn(
    tmp_path: Path, page: Page, claude_bin: Path, model_server: ModelServer
) -> None:
    gate = threading.Event()
    model_server.set_script([Stall(release=gate, then=text("all done"))])
    seed(tmp_path, agent_env(model_server.url))
    with live_hive(tmp_path, claude_bin) as hive:
        try:
            page.goto(f"{hive.url}/agents/alice")
            expect(page.locator(".agent-head .badge.running")).to_be_visible()
            hive.op("send", to="alice", body="summarise the open issues")
            assert model_server.wait_for(lambda reqs: any(r.main for r in reqs), 60)
            expect(page.locator("#turn-state")).to_have_attribute("data-turn", "thinking")
            expect(page.locator("#stream")).to_contain_text("summarise the open issues")
            screenshot(page, "agent-mid-turn.png")
            # The host's operator token stays server-side.
            host_token = json.loads((hive.paths.run / "agent-host.json").read_text())["token"]
            assert host_token not in page.content()
        finally:
            gate.set()
        expect(page.locator("#stream")).to_contain_text("all done", timeout=60_000)
        expect(page.locator("#turn-state")).to_have_attribute("data-turn", "idle")
