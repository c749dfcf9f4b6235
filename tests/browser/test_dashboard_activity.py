"""The front page: the feed, live over SSE, filters, paging and a thread's conversation."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from hyperhive.config import AgentConfig
from hyperhive.core.dashboard.activity import PAGE
from hyperhive.permissions import ToolGroup
from tests.browser.conftest import LiveHive, live_hive
from tests.support.hive import seed_home
from tests.support.spend import reported

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
        page.goto(f"{hive.url}/")
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
        expect(page).to_have_url(f"{hive.url}/?agent=&kind=approval")
        expect(items).to_have_count(2)
        page.goto(f"{hive.url}/?agent=queen")
        # Its approval, asked and denied, and the notice of the denial it was sent.
        expect(page.locator("#feed .feed-item.kind-approval")).to_have_count(2)
        expect(page.locator("#feed .feed-item.kind-message")).to_have_count(1)
        expect(page.locator("#feed .feed-item.kind-message")).to_contain_text("→ queen")
        page.goto(f"{hive.url}/activity?agent=bob&kind=message")  # the old address
        expect(page).to_have_url(f"{hive.url}/?agent=bob&kind=message")
        expect(items).to_have_count(3)

        # One thread, across agents.
        page.locator(f"#feed [data-message='{hello['id']}'] a.thread-link").click()
        conversation = page.locator("#conversation .msg")
        expect(conversation).to_have_count(2)
        expect(conversation.nth(0)).to_contain_text("alice → bob")
        expect(conversation.nth(1)).to_contain_text("on it")
        expect(conversation.nth(1)).to_have_attribute("style", "--depth: 1")


def test_the_feed_pages_by_cursor(tmp_path: Path, page: Page) -> None:
    seed(tmp_path)
    with live_hive(tmp_path) as hive:
        for i in range(PAGE + 5):
            hive.as_agent("alice", "send", to="bob", body=f"note {i}")
        page.goto(f"{hive.url}/")
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


def _turn_end(hive: LiveHive, agent: str, run_id: str, cost: float) -> None:
    # What the agent's harness reports at a turn's end, on the agent's own socket.
    hive.as_agent(
        agent,
        "turn_end",
        outcome="ok",
        spend=reported(cost, 100, run_id=run_id, output_tokens=20),
    )


def test_the_front_page_shows_turns_with_cost_live_filters_by_kind_and_pages_across_kinds(
    tmp_path: Path, page: Page
) -> None:
    seed(tmp_path)
    with live_hive(tmp_path) as hive:
        for i in range(PAGE):
            hive.as_agent("alice", "send", to="bob", body=f"note {i}")
            if i % 10 == 0:
                _turn_end(hive, "bob", f"run-old-{i:04d}", 0.001 * (i + 1))
        page.goto(f"{hive.url}/")
        expect(page.locator("body")).to_have_attribute("data-live", "1")
        items = page.locator("#feed .feed-item")
        expect(items).to_have_count(PAGE)

        # Arriving while the page is open: a turn with its cost, then a bash task's end.
        _turn_end(hive, "alice", "run-live-0001", 0.0421)
        turns = page.locator("#feed .feed-item.kind-turn")
        expect(items.first).to_have_attribute("data-kind", "turn")
        expect(items.first).to_contain_text("alice: turn ok · $0.0421")
        expect(items.first.locator(".cost")).to_contain_text("120 tokens")
        # A resent turn_end (after a restart, say) is the same turn: still one row.
        _turn_end(hive, "alice", "run-live-0001", 0.0421)
        hive.as_agent(
            "bob",
            "report_activity",
            kind="bash",
            phase="finished",
            ref="t-build",
            summary="make test",
            status="done",
            exit_code=2,
            event_id="evt-000000001",
        )
        expect(items.first).to_have_attribute("data-kind", "bash")
        expect(items.first).to_contain_text("bob: bash task t-build finished (done, exit 2)")
        # Spend today: the six turns' costs, by the budgets' durable figure.
        expect(page.locator("[data-count=spend]")).to_contain_text("$0.1471 spent today")

        # Kind filter: only turns, each once (the resent one too): five older, one live.
        page.select_option("select[name=kind]", "turn")
        page.click("#activity-filter button")
        expect(page).to_have_url(f"{hive.url}/?agent=&kind=turn")
        expect(turns).to_have_count(6)
        expect(items).to_have_count(6)

        # Paging across kinds: page one and page two together are the whole feed,
        # newest first, with no item twice and none missing.
        page.goto(f"{hive.url}/")
        expect(items).to_have_count(PAGE)
        first = items.evaluate_all("els => els.map(e => e.dataset.cursor)")
        page.click("a.older")
        expect(items).to_have_count(7)
        second = items.evaluate_all("els => els.map(e => e.dataset.cursor)")
        keys = [_key(c) for c in first + second]
        assert len(set(keys)) == len(keys) == PAGE + 7
        assert keys == sorted(keys, reverse=True)
        kinds = items.evaluate_all("els => els.map(e => e.dataset.kind)")
        assert "message" in kinds and "turn" in kinds
        expect(items.last).to_contain_text("note 0")


def _key(cursor: str) -> tuple[float, int, int]:
    at, source, row = cursor.split("_")
    return float(at), int(source), int(row)


def test_a_question_and_its_answer_are_feed_events_shown_live_and_filterable(
    tmp_path: Path, page: Page
) -> None:
    seed(tmp_path)
    with live_hive(tmp_path) as hive:
        page.goto(f"{hive.url}/")
        expect(page.locator("body")).to_have_attribute("data-live", "1")
        questions = page.locator("#feed .feed-item.kind-question")
        answers = page.locator("#feed .feed-item.kind-answer")
        long = "May I delete the staging database?\n" + "context " * 40
        asked = hive.as_agent("alice", "ask_operator", question=long)
        qid = asked["question_id"]
        expect(questions).to_have_count(1)
        expect(questions).to_contain_text(f"alice asked the operator (question #{qid}): May I")
        expect(questions.locator(".state")).to_have_text("asked")
        expect(page.locator("[data-count=waiting]")).to_contain_text("1 questions")
        answered = hive.op("answer_question", question_id=qid, answer="No, keep it.")
        expect(answers).to_have_count(1)
        expect(answers).to_contain_text(f"the operator answered alice's question #{qid}")
        expect(answers).to_contain_text("No, keep it.")
        expect(page.locator("[data-count=waiting]")).to_contain_text("0 questions")

        # One row each, with what the feed needs; a long question is quoted, cut plainly.
        rows = hive.call(hive.coord.store.activity.page)
        [q] = [r for r in rows if r.kind == "question"]
        [a] = [r for r in rows if r.kind == "answer"]
        assert q.agent == a.agent == "alice"
        assert q.detail == {"question_id": qid, "state": "asked"}
        assert a.detail == {
            "question_id": qid,
            "state": "answered",
            "message_id": answered["message_id"],
        }
        assert q.title.endswith("…") and "\n" not in q.title and len(q.title) < 240

        # Filterable by kind, and by the asking agent.
        for kind, shown in (("question", questions), ("answer", answers)):
            page.select_option("select[name=kind]", kind)
            page.click("#activity-filter button")
            expect(page).to_have_url(f"{hive.url}/?agent=&kind={kind}")
            expect(page.locator("#feed .feed-item")).to_have_count(1)
            expect(shown).to_have_count(1)
        page.goto(f"{hive.url}/?agent=bob&kind=question")
        expect(page.locator("#feed .feed-item")).to_have_count(0)
