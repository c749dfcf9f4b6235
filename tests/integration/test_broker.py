"""The broker over real agent sockets and a real store (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from hyperhive.config import AgentConfig, HivePaths
from hyperhive.errors import (
    CycleRefused,
    InvalidRequest,
    LimitExceeded,
    MalformedFrame,
    NotFound,
    PermissionDenied,
    RouteRefused,
    SelfParent,
    ToolGroupDenied,
    UnknownCommand,
    UnknownParent,
)
from hyperhive.permissions import ToolGroup
from hyperhive.store.postgres import open_postgres
from hyperhive.sysusers import hive_id
from tests.support.hive import agent, agent_call, coordinator, op_call, operator, seed_home
from tests.support.stores import read_hive

pytestmark = pytest.mark.anyio

TREE = {"queen": None, "alice": None, "bob": "alice", "carol": "bob", "dan": "alice", "eve": None}


def _seed(tmp_path: Path, store_url: str | None, **overrides: AgentConfig) -> Path:
    agents = {name: overrides.get(name, AgentConfig()) for name in TREE}
    seed_home(tmp_path, agents, TREE, store_url=store_url)
    return tmp_path


async def test_send_recv_ack_roundtrip_with_identity_from_the_socket(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    async with coordinator(_seed(tmp_path, hive_store_url)) as c:
        async with agent(c.paths, "bob") as bob, agent(c.paths, "alice") as alice:
            sent = await agent_call(bob, "send", to="alice", body="hello")
            assert isinstance(sent, dict) and sent["to"] == "alice"
            rows = await agent_call(alice, "recv")
            assert isinstance(rows, list) and len(rows) == 1
            assert rows[0]["from"] == "bob" and rows[0]["body"] == "hello"
            assert await agent_call(alice, "recv") == []  # delivered: not handed out twice
            reply = await agent_call(alice, "send", to="bob", body="hi", in_reply_to=sent["id"])
            got = await agent_call(bob, "recv", max=5)
            assert isinstance(got, list) and got[0]["in_reply_to"] == sent["id"]
            assert isinstance(reply, dict)
            with pytest.raises(MalformedFrame, match="identity comes from the socket"):
                await bob.call_json({"cmd": "send", "to": "alice", "body": "x", "from": "queen"})
            assert await agent_call(alice, "recv") == []


async def test_recv_is_capped_at_five_and_never_blocks(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    async with coordinator(_seed(tmp_path, hive_store_url)) as c:
        async with agent(c.paths, "alice") as alice, operator(c.paths) as op:
            for i in range(8):
                await op_call(op, "send", to="alice", body=f"m{i}")
            with anyio.fail_after(10):  # none waits for mail: a blocking one would hang
                first = await agent_call(alice, "recv", max=50)
                rest = await agent_call(alice, "recv", max=50)
                empty = await agent_call(alice, "recv", max=50)
            assert isinstance(first, list) and [m["body"] for m in first] == [
                f"m{i}" for i in range(5)
            ]
            assert isinstance(rest, list) and len(rest) == 3
            assert empty == []


async def test_routing_rules_and_refusals(tmp_path: Path, hive_store_url: str | None) -> None:
    restricted = AgentConfig(allowed_recipients=["operator"])
    extra = AgentConfig(extra_recipients=["eve"])
    async with coordinator(_seed(tmp_path, hive_store_url, carol=restricted, dan=extra)) as c:
        async with agent(c.paths, "carol") as carol, agent(c.paths, "dan") as dan:
            # <parent> resolves at the broker; the parent is reachable despite the allow-list.
            sent = await agent_call(carol, "send", to="<parent>", body="up")
            assert isinstance(sent, dict) and sent["to"] == "bob"
            await agent_call(carol, "send", to="operator", body="op")
            with pytest.raises(RouteRefused, match="allowed_recipients") as info:
                await agent_call(carol, "send", to="dan", body="x")
            assert "extra_recipients" in info.value.message  # says how to get it allowed
            assert isinstance(await agent_call(dan, "send", to="eve", body="x"), dict)
            with pytest.raises(RouteRefused, match="family rule"):
                await agent_call(dan, "send", to="queen", body="x")
            with pytest.raises(NotFound, match="unknown recipient 'zed'"):
                await agent_call(dan, "send", to="zed", body="x")
        async with agent(c.paths, "eve") as eve:
            sent = await agent_call(eve, "send", to="<parent>", body="root's parent")
            assert isinstance(sent, dict) and sent["to"] == "operator"
            with pytest.raises(LimitExceeded, match="65536 bytes"):
                await agent_call(eve, "send", to="queen", body="x" * 70_000)
            with pytest.raises(NotFound, match="in_reply_to #99999"):
                await agent_call(eve, "send", to="queen", body="x", in_reply_to=99999)


async def test_at_least_once_redelivery_and_scoped_acks(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    home = _seed(tmp_path, hive_store_url)
    async with coordinator(home) as c, operator(c.paths) as op:
        ids = []
        for i in range(3):
            r = await op_call(op, "send", to="alice", body=f"m{i}")
            assert isinstance(r, dict)
            ids.append(r["id"])
        async with agent(c.paths, "alice") as alice, agent(c.paths, "bob") as bob:
            got = await agent_call(alice, "recv", max=5)
            assert isinstance(got, list) and len(got) == 3
            # bob cannot ack alice's rows: his ack_until touches only his own.
            assert await agent_call(bob, "ack_until", up_to=ids[-1]) == {"acked": 0}
            assert await agent_call(alice, "ack_until", up_to=ids[0]) == {"acked": 1}
            # A new incarnation (the harness died before acking) gets the rest again.
            await agent_call(alice, "attach")
            again = await agent_call(alice, "recv", max=5)
            assert isinstance(again, list) and [m["id"] for m in again] == ids[1:]
            await agent_call(alice, "turn_end", outcome="ok", handled=ids[1:])
            await agent_call(alice, "attach")
            assert await agent_call(alice, "recv", max=5) == []
    # ...and nothing changes across a coordinator restart.
    async with coordinator(home) as c, agent(c.paths, "alice") as alice:
        await agent_call(alice, "attach")
        assert await agent_call(alice, "recv", max=5) == []


async def test_wait_is_pushed_by_mail_todos_compact_and_fence(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    async with coordinator(_seed(tmp_path, hive_store_url)) as c, operator(c.paths) as op:
        async with agent(c.paths, "alice") as alice:
            empty = await agent_call(alice, "wait", timeout=0)
            assert isinstance(empty, dict) and empty["messages"] == [] and not empty["stop"]
            result: dict[str, object] = {}

            async def waiter() -> None:
                r = await agent_call(alice, "wait", timeout=30)
                assert isinstance(r, dict)
                result.update(r)

            with anyio.fail_after(5):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(waiter)
                    await anyio.wait_all_tasks_blocked()
                    await op_call(op, "send", to="alice", body="wake up")
            messages = result["messages"]
            assert isinstance(messages, list) and messages[0]["body"] == "wake up"

            await agent_call(alice, "todo_upsert", subsystem="bash", key="t1", body="running")
            woke = await agent_call(alice, "wait", timeout=5, todo_version=0)
            assert isinstance(woke, dict) and woke["todos_changed"]
            version = woke["todo_version"]
            idle = await agent_call(alice, "wait", timeout=0, todo_version=version)
            assert isinstance(idle, dict) and not idle["todos_changed"]

            await agent_call(alice, "fence")
            stopped = await agent_call(alice, "wait", timeout=5, todo_version=version)
            assert isinstance(stopped, dict) and stopped["stop"]
            await op_call(op, "send", to="alice", body="after fence")
            fenced = await agent_call(alice, "recv", max=5)
            assert isinstance(fenced, list) and fenced[0]["from"] == "graceful-stop"
            assert fenced[0]["id"] == 0
            await agent_call(alice, "attach")  # next incarnation: the mail is still there
            later = await agent_call(alice, "recv", max=5)
            # "wake up" was handed to the old incarnation but never acked: it comes back too.
            assert isinstance(later, list)
            assert [m["body"] for m in later] == ["wake up", "after fence"]


async def test_malformed_frames_get_errors_and_the_connection_survives(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    async with coordinator(_seed(tmp_path, hive_store_url)) as c, agent(c.paths, "alice") as alice:
        with pytest.raises(UnknownCommand, match="set_parent"):
            await alice.call_json({"cmd": "set_parent", "child": "alice"})
        with pytest.raises(MalformedFrame, match="max"):
            await alice.call_json({"cmd": "recv", "max": "lots"})
        await alice.send_raw(b"garbage\n" + b"x" * (2 << 20) + b"\n")
        meta = await agent_call(alice, "get_agent_meta")
        assert isinstance(meta, dict) and meta["name"] == "alice"


async def test_tool_groups_are_enforced_server_side(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    meta_only = AgentConfig(tool_groups=[ToolGroup.META])
    async with (
        coordinator(_seed(tmp_path, hive_store_url, eve=meta_only)) as c,
        agent(c.paths, "eve") as eve,
    ):
        with pytest.raises(ToolGroupDenied, match="'messaging' tool group"):
            await agent_call(eve, "send", to="queen", body="x")
        with pytest.raises(ToolGroupDenied, match="'inbox'"):
            await agent_call(eve, "remind", message="x", delay_seconds=1)
        with pytest.raises(ToolGroupDenied, match="'scheduling'"):
            await agent_call(eve, "schedule_prompt", target="eve", prompt="x", every_seconds=60)
        assert isinstance(await agent_call(eve, "set_status", text="fine"), dict)
        # Harness and producer commands are the agent's own business, in no group.
        assert isinstance(await agent_call(eve, "wait", timeout=0), dict)


async def test_wake_from_an_in_sandbox_producer(tmp_path: Path, hive_store_url: str | None) -> None:
    async with coordinator(_seed(tmp_path, hive_store_url)) as c, agent(c.paths, "alice") as alice:
        await agent_call(alice, "wake", **{"from": "matrix", "body": "new dm"})
        rows = await agent_call(alice, "recv")
        assert isinstance(rows, list) and rows[0]["from"] == "matrix"
        for label in ("queen", "operator", "alice"):
            with pytest.raises(PermissionDenied, match="never someone else"):
                await agent_call(alice, "wake", **{"from": label, "body": "spoof"})
        with pytest.raises(InvalidRequest, match="wake label"):
            await agent_call(alice, "wake", **{"from": "Bad Label", "body": "spoof"})
        assert await agent_call(alice, "recv") == []


async def test_a_keyed_wake_lands_once(tmp_path: Path, hive_store_url: str | None) -> None:
    # A producer that died between "the wake was accepted" and "I noted it" sends it again.
    async with coordinator(_seed(tmp_path, hive_store_url)) as c, agent(c.paths, "alice") as alice:
        frame = {"from": "forge", "body": "review on #1", "key": "7@2026-12-01T03:00:00"}
        first = await agent_call(alice, "wake", **frame)
        again = await agent_call(alice, "wake", **frame)
        assert isinstance(first, dict) and again == first
        other = await agent_call(alice, "wake", **{**frame, "key": "8@2026-12-01T03:01:00"})
        assert isinstance(other, dict) and other["id"] != first["id"]
        rows = await agent_call(alice, "recv", max=10)
        assert isinstance(rows, list)
        assert [r["id"] for r in rows] == [first["id"], other["id"]]
        with pytest.raises(InvalidRequest, match="key"):  # the server checks, not only clients
            await alice.call_json({"cmd": "wake", **frame, "key": ""})


async def test_operator_mailbox_and_questions(tmp_path: Path, hive_store_url: str | None) -> None:
    async with coordinator(_seed(tmp_path, hive_store_url)) as c, operator(c.paths) as op:
        async with agent(c.paths, "bob") as bob:
            asked = await agent_call(bob, "ask_operator", question="may I deploy?")
            assert isinstance(asked, dict)
            inbox = await op_call(op, "inbox")
            assert isinstance(inbox, list) and inbox[-1]["from"] == "bob"
            open_q = await op_call(op, "questions")
            assert isinstance(open_q, list) and open_q[0]["question"] == "may I deploy?"
            await op_call(op, "answer_question", question_id=asked["question_id"], answer="yes")
            answer = await agent_call(bob, "recv")
            assert isinstance(answer, list)
            assert answer[0]["from"] == "operator" and answer[0]["body"] == "yes"
            assert answer[0]["in_reply_to"] == asked["message_id"]
            assert await op_call(op, "questions") == []
            with pytest.raises(NotFound):
                await op_call(op, "answer_question", question_id=999, answer="?")
            unread = await op_call(op, "inbox", unread_only=True)
            assert isinstance(unread, list) and len(unread) == 1
            await op_call(op, "ack_until", up_to=unread[-1]["id"])
            assert await op_call(op, "inbox", unread_only=True) == []
            views = await op_call(op, "messages", agent="bob")
            assert isinstance(views, dict) and views["outbox"][0]["to"] == "operator"
            sent = await op_call(op, "outbox")
            assert isinstance(sent, list) and [m["body"] for m in sent] == ["yes"]


async def test_status_and_meta(tmp_path: Path, hive_store_url: str | None) -> None:
    async with coordinator(_seed(tmp_path, hive_store_url)) as c, agent(c.paths, "bob") as bob:
        with pytest.raises(LimitExceeded, match="200"):
            await agent_call(bob, "set_status", text="x" * 201)
        with pytest.raises(InvalidRequest, match="single line"):
            await agent_call(bob, "set_status", text="a\nb")
        await agent_call(bob, "set_status", text="compiling")
        meta = await agent_call(bob, "get_agent_meta")
        assert isinstance(meta, dict)
        assert meta["status_text"] == "compiling" and meta["parent"] == "alice"
        assert meta["status_set_at"] is not None and meta["running"] is False
        other = await agent_call(bob, "get_agent_meta", name="eve")
        assert isinstance(other, dict) and other["parent"] is None
        await agent_call(bob, "set_status", text="")
        meta = await agent_call(bob, "get_agent_meta")
        assert (
            isinstance(meta, dict) and meta["status_text"] == "" and meta["status_set_at"] is None
        )


async def test_agent_meta_names_the_hive(tmp_path: Path, hive_store_url: str | None) -> None:
    async with coordinator(_seed(tmp_path, hive_store_url)) as c, agent(c.paths, "bob") as bob:
        meta = await agent_call(bob, "get_agent_meta")
        assert isinstance(meta, dict) and meta["hive_name"] == hive_id(c.paths)  # unnamed
    named = tmp_path / "named"
    seed_home(named, dict.fromkeys(TREE, AgentConfig()), TREE, 'name = "acme research"\n')
    async with coordinator(named) as c, agent(c.paths, "bob") as bob:
        meta = await agent_call(bob, "get_agent_meta", name="alice")
        assert isinstance(meta, dict) and meta["hive_name"] == "acme research"


async def test_set_parent_on_the_operator_socket(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    async with coordinator(_seed(tmp_path, hive_store_url)) as c, operator(c.paths) as op:
        async with c.bus.subscribe() as events:
            with pytest.raises(CycleRefused, match="cycle"):
                await op_call(op, "set_parent", child="alice", new_parent="carol")
            with pytest.raises(UnknownParent, match="unknown parent 'alcie'"):
                await op_call(op, "set_parent", child="bob", new_parent="alcie")
            with pytest.raises(SelfParent, match="own parent"):
                await op_call(op, "set_parent", child="bob", new_parent="bob")
            before = c.paths.topology.stat().st_mtime_ns
            same = await op_call(op, "set_parent", child="bob", new_parent="alice")
            assert isinstance(same, dict) and same["changed"] is False
            assert c.paths.topology.stat().st_mtime_ns == before
            moved = await op_call(op, "set_parent", child="eve", new_parent="queen")
            assert isinstance(moved, dict) and moved["changed"] is True
            with anyio.fail_after(2):
                event = await events.receive()
            assert event["kind"] == "topology" and event["child"] == "eve"
            assert json.loads(c.paths.topology.read_text())["eve"] == "queen"
            await op_call(op, "set_parent", child="eve")  # no parent: promote to root
            assert json.loads(c.paths.topology.read_text())["eve"] is None


async def test_the_hive_lives_in_the_store_it_was_seeded_with(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    """The parametrization is real: on PostgreSQL nothing lands in a hive.db, and the
    row is in that database; read_hive finds it on either backend."""
    async with coordinator(_seed(tmp_path, hive_store_url)) as c, agent(c.paths, "bob") as bob:
        sent = await agent_call(bob, "send", to="alice", body="where am I")
        assert isinstance(sent, dict)
    paths = HivePaths(tmp_path)
    hive = await read_hive(paths)
    assert [(m.id, m.body) for m in hive.messages] == [(sent["id"], "where am I")]
    if hive_store_url is None:
        assert paths.db.exists() and hive.integrity == "ok"
        return
    assert not paths.db.exists() and hive.integrity is None
    store = await open_postgres(hive_store_url)
    try:
        assert [m.body for m in await store.messages.scan()] == ["where am I"]
    finally:
        await store.close()
