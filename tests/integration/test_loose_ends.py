"""Reminders, todos, schedules, cancellation rules, helper events, compact."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from hyperhive.config import AgentConfig
from hyperhive.errors import (
    Conflict,
    InvalidRequest,
    LimitExceeded,
    MalformedFrame,
    NotFound,
    PermissionDenied,
)
from hyperhive.permissions import Capability, ToolGroup
from tests.support.hive import agent, agent_call, coordinator, op_call, operator, seed_home

pytestmark = pytest.mark.anyio

TREE = {"queen": None, "alice": None, "bob": "alice", "carol": "bob", "eve": None}
MANAGER = AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))


def _seed(
    tmp_path: Path, store_url: str | None, hive_toml: str = "", **overrides: AgentConfig
) -> Path:
    agents = {name: overrides.get(name, AgentConfig()) for name in TREE}
    seed_home(tmp_path, agents, TREE, hive_toml, store_url)
    return tmp_path


async def _next_message(client: object, within: float = 5) -> dict[str, object]:
    from hyperhive.client import RpcClient

    assert isinstance(client, RpcClient)
    with anyio.fail_after(within):
        result = await agent_call(client, "wait", timeout=within)
    assert isinstance(result, dict) and result["messages"], result
    message = result["messages"][0]
    assert isinstance(message, dict)
    return message


async def test_remind_fires_into_the_inbox(tmp_path: Path, hive_store_url: str | None) -> None:
    async with coordinator(_seed(tmp_path, hive_store_url)) as c, agent(c.paths, "bob") as bob:
        with pytest.raises(MalformedFrame, match="exactly one"):
            await bob.call_json({"cmd": "remind", "message": "x"})
        made = await agent_call(bob, "remind", message="stand up", delay_seconds=0.2)
        assert isinstance(made, dict)
        ends = await agent_call(bob, "get_loose_ends")
        assert isinstance(ends, list) and ends[0]["kind"] == "reminder"
        message = await _next_message(bob)
        assert message["from"] == "reminder" and "stand up" in str(message["body"])
        assert await agent_call(bob, "get_loose_ends") == []


async def test_reminder_limit_and_a_long_one_delivered_whole(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    home = _seed(tmp_path, hive_store_url, "remind_max_pending = 2\n")
    async with coordinator(home) as c, agent(c.paths, "bob") as bob:
        await agent_call(bob, "remind", message="a", delay_seconds=3600)
        await agent_call(bob, "remind", message="b", delay_seconds=3600)
        with pytest.raises(LimitExceeded, match="limit is 2"):
            await agent_call(bob, "remind", message="c", delay_seconds=3600)
        ends = await agent_call(bob, "get_loose_ends")
        assert isinstance(ends, list)
        await agent_call(bob, "cancel_loose_end", kind="reminder", row_id=ends[0]["id"])
        # The largest a reminder may be: delivered whole, in the message itself (its
        # host may be another machine, so no file in the agent's state/ is written).
        big = ("long note " * 6600)[: 64 * 1024]
        made = await agent_call(bob, "remind", message=big, at_unix_timestamp=time.time() - 1)
        assert isinstance(made, dict)
        message = await _next_message(bob)
        assert message["body"] == f"[reminder #{made['id']}] {big}"
        assert not (c.paths.agent_state("bob") / "reminders").exists()


async def test_reminders_due_while_down_fire_at_start(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    home = _seed(tmp_path, hive_store_url)
    async with coordinator(home) as c, agent(c.paths, "bob") as bob:
        await agent_call(bob, "remind", message="while you slept", delay_seconds=0.3)
    await anyio.sleep(0.4)  # wall-clock time must pass with the coordinator down
    async with coordinator(home) as c, agent(c.paths, "bob") as bob:
        message = await _next_message(bob)
        assert "while you slept" in str(message["body"])


async def test_todos_wake_and_show_in_loose_ends(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    async with coordinator(_seed(tmp_path, hive_store_url)) as c, agent(c.paths, "bob") as bob:
        await agent_call(bob, "todo_upsert", subsystem="bash", key="t1", body="running")
        await agent_call(bob, "todo_upsert", subsystem="bash", key="t1", body="done: exit 0")
        ends = await agent_call(bob, "get_loose_ends")
        assert isinstance(ends, list) and len(ends) == 1
        assert ends[0]["body"] == "done: exit 0" and ends[0]["key"] == "t1"
        assert await agent_call(bob, "todo_clear", subsystem="bash", key="t1") == {"cleared": True}
        assert await agent_call(bob, "get_loose_ends") == []


async def test_loose_ends_carry_whole_bodies(tmp_path: Path, hive_store_url: str | None) -> None:
    # The model acts on the end of a body (a completion's Read(<path>) pointer, the
    # actual ask at the end of a question), so get_loose_ends returns every byte.
    todo = (
        "bash task t1 done (exit 0) after 12.0s\n"
        + "cmd: "
        + "x" * 400
        + "\n"
        + "stdout: Read(/state/harness/bash-tasks/t1.out)"
    )
    question = "context " * 60 + "\n\nso: may I deploy to production tonight?"
    assert len(todo) > 200 and len(question) > 200
    async with coordinator(_seed(tmp_path, hive_store_url)) as c, agent(c.paths, "bob") as bob:
        await agent_call(bob, "todo_upsert", subsystem="bash", key="t1", body=todo)
        await agent_call(bob, "ask_operator", question=question)
        ends = await agent_call(bob, "get_loose_ends")
        assert isinstance(ends, list)
        bodies = {str(e["kind"]): e["body"] for e in ends if isinstance(e, dict)}
        assert bodies == {"todo": todo, "question": question}


async def test_loose_ends_visibility_follows_the_tree(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    nosy = AgentConfig(capabilities=[Capability.QUERY_AGENT_STATE])
    async with coordinator(_seed(tmp_path, hive_store_url, queen=nosy)) as c:
        async with agent(c.paths, "carol") as carol:
            await agent_call(carol, "remind", message="carol's", delay_seconds=3600)
        async with agent(c.paths, "alice") as alice:
            ends = await agent_call(alice, "get_loose_ends", agent="carol")  # grandchild
            assert isinstance(ends, list) and ends[0]["agent"] == "carol"
            with pytest.raises(PermissionDenied, match="hive-wide"):
                await agent_call(alice, "get_loose_ends", agent="*")
        async with agent(c.paths, "eve") as eve:
            with pytest.raises(PermissionDenied, match="query_agent_state"):
                await agent_call(eve, "get_loose_ends", agent="carol")
        async with agent(c.paths, "queen") as queen:
            ends = await agent_call(queen, "get_loose_ends", agent="carol")
            assert isinstance(ends, list) and len(ends) == 1
        async with operator(c.paths) as op:
            everything = await op_call(op, "get_loose_ends", agent="*")
            assert isinstance(everything, list) and len(everything) == 1


async def test_cancel_rules(tmp_path: Path, hive_store_url: str | None) -> None:
    async with coordinator(_seed(tmp_path, hive_store_url)) as c:
        async with agent(c.paths, "carol") as carol:
            r1 = await agent_call(carol, "remind", message="one", delay_seconds=3600)
            r2 = await agent_call(carol, "remind", message="two", delay_seconds=3600)
            q = await agent_call(carol, "ask_operator", question="?")
            await agent_call(carol, "todo_upsert", subsystem="s", key="k", body="b")
            ends = await agent_call(carol, "get_loose_ends")
        assert isinstance(r1, dict) and isinstance(r2, dict) and isinstance(q, dict)
        assert isinstance(ends, list)
        todo_id = next(e["id"] for e in ends if e["kind"] == "todo")
        async with agent(c.paths, "eve") as eve:
            with pytest.raises(PermissionDenied, match="not a descendant"):
                await agent_call(eve, "cancel_loose_end", kind="reminder", row_id=r1["id"])
        async with agent(c.paths, "alice") as alice:  # grandparent moderates
            assert await agent_call(
                alice, "cancel_loose_end", kind="reminder", row_id=r1["id"]
            ) == {"cancelled": True}
            assert await agent_call(
                alice, "cancel_loose_end", kind="question", row_id=q["question_id"]
            ) == {"cancelled": True}
            with pytest.raises(PermissionDenied, match="belongs to carol"):
                await agent_call(alice, "cancel_loose_end", kind="todo", row_id=todo_id)
            with pytest.raises(NotFound):
                await agent_call(alice, "cancel_loose_end", kind="reminder", row_id=4242)
        async with agent(c.paths, "carol") as carol:
            with pytest.raises(PermissionDenied, match="only a root agent"):
                await agent_call(carol, "cancel_loose_end", kind="approval", row_id=1)
            assert await agent_call(carol, "cancel_loose_end", kind="todo", row_id=todo_id) == {
                "cancelled": True
            }
            left = await agent_call(carol, "get_loose_ends")
            assert isinstance(left, list) and [e["id"] for e in left] == [r2["id"]]


async def test_schedules_fire_once_for_missed_periods(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    home = _seed(tmp_path, hive_store_url, alice=MANAGER, eve=MANAGER)
    async with coordinator(home) as c, agent(c.paths, "alice") as alice:
        with pytest.raises(PermissionDenied, match="not a descendant"):
            await agent_call(alice, "schedule_prompt", target="eve", prompt="x", every_seconds=60)
        with pytest.raises(InvalidRequest, match="cron"):
            await agent_call(alice, "schedule_prompt", target="bob", prompt="x", cron="bogus")
        made = await agent_call(
            alice, "schedule_prompt", target="bob", prompt="standup", every_seconds=60
        )
        cron = await agent_call(
            alice, "schedule_prompt", target="carol", prompt="nightly", cron="0 3 * * *"
        )
        assert isinstance(made, dict) and isinstance(cron, dict)
        listed = await agent_call(alice, "list_schedules")
        assert isinstance(listed, list) and {s["id"] for s in listed} == {made["id"], cron["id"]}
        # Ten periods pass with nobody firing them: one delivery, then back on the grid.
        now = time.time()
        await c.scheduler.fire_due(now + 600)
        inbox = await op_call_messages(c, "bob")
        assert [m for m in inbox if "standup" in m["body"]] and len(inbox) == 1
        row = await c.loose_ends.schedule_row(made["id"])
        assert row is not None and row.next_at > now + 600
        async with agent(c.paths, "eve") as eve:
            with pytest.raises(PermissionDenied):
                await agent_call(eve, "cancel_schedule", schedule_id=made["id"])
        assert await agent_call(alice, "cancel_schedule", schedule_id=made["id"]) == {
            "cancelled": True
        }
        with pytest.raises(Conflict, match="already cancelled"):
            await agent_call(alice, "cancel_schedule", schedule_id=made["id"])


async def op_call_messages(c: object, name: str) -> list[dict[str, str]]:
    from hyperhive.core.coordinator import Coordinator

    assert isinstance(c, Coordinator)
    async with operator(c.paths) as op:
        views = await op_call(op, "messages", agent=name)
    assert isinstance(views, dict)
    inbox = views["inbox"]
    assert isinstance(inbox, list)
    return [m for m in inbox if isinstance(m, dict)]  # type: ignore[misc]


async def test_helper_events_reach_the_submitting_agent(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    # queen is the root manager; alice holds approvals for her subtree.
    home = _seed(tmp_path, hive_store_url, alice=MANAGER)
    async with coordinator(home) as c:
        async with agent(c.paths, "carol") as carol:
            await agent_call(carol, "turn_end", outcome="needs_login")
            await agent_call(carol, "turn_end", outcome="ok")
        async with agent(c.paths, "alice") as alice:
            ends = await agent_call(alice, "get_loose_ends")
        assert isinstance(ends, list)
        keys = sorted(e["key"] for e in ends if e["subsystem"] == "core")
        assert keys == ["logged_in:carol", "needs_login:carol"]
        # eve is a root: her submitter is the root manager; crashes go to the inbox.
        await c.notices.notify_submitter("eve", _crash("eve"))
        async with agent(c.paths, "queen") as queen:
            message = await _next_message(queen)
        assert message["from"] == "system"
        # queen holds no diagnostics group here: the sentence names no get_logs for her.
        assert message["body"] == (
            "[container_crash] eve crashed: boom. Restart it or fix its config; tell the "
            "operator if it keeps crashing."
        )
        assert c.notices.submitter_of("queen") is None
        # alice (a manager, diagnostics included) is told to read the log first.
        await c.notices.notify_submitter("carol", _crash("carol"))
        async with agent(c.paths, "alice") as alice:
            message = await _next_message(alice)
        assert message["body"] == (
            "[container_crash] carol crashed: boom. Read its log (get_logs), then restart it "
            "or fix its config; tell the operator if it keeps crashing."
        )


def _crash(agent_name: str) -> object:
    from hyperhive.protocol import ContainerCrash

    return ContainerCrash(agent=agent_name, reason="boom")


async def test_compact_is_gated_on_the_last_turn_and_deferred(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    async with coordinator(_seed(tmp_path, hive_store_url)) as c, agent(c.paths, "bob") as bob:
        with pytest.raises(Conflict, match="unknown"):
            await agent_call(bob, "compact")
        await agent_call(bob, "turn_end", outcome="ok", context_usage=0.5)
        with pytest.raises(Conflict, match="50%"):
            await agent_call(bob, "compact")
        await agent_call(bob, "turn_end", outcome="ok", context_usage=0.7)
        queued = await agent_call(bob, "compact")
        assert isinstance(queued, dict) and queued["queued"] is True
        woke = await agent_call(bob, "wait", timeout=5)
        assert isinstance(woke, dict) and woke["compact"] is True
        # (No spend reported, so none counted.)
        ended = {"compact_pending": True, "spend": None}
        assert await agent_call(bob, "turn_end", outcome="ok") == ended
        ended["compact_pending"] = False
        assert await agent_call(bob, "turn_end", outcome="ok") == ended


async def test_the_operators_compact_is_ungated_and_wakes_the_agent(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    async with coordinator(_seed(tmp_path, hive_store_url)) as c, agent(c.paths, "bob") as bob:
        async with operator(c.paths) as op:
            unknown = await op_call(op, "compact", agent="bob")  # no turn recorded yet
            assert isinstance(unknown, dict) and unknown["queued"] is True
            assert unknown["context_usage"] is None
            woke = await agent_call(bob, "wait", timeout=5)
            assert isinstance(woke, dict) and woke["compact"] is True
            assert await agent_call(bob, "turn_end", outcome="ok", context_usage=0.1) == {
                "compact_pending": True,
                "spend": None,
            }
            low = await op_call(op, "compact", agent="bob")  # 10%: the agent's own is refused
            assert isinstance(low, dict) and low["queued"] is True and low["context_usage"] == 0.1
        with pytest.raises(Conflict, match="10%"):
            await agent_call(bob, "compact")
