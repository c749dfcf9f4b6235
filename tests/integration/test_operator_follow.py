"""The operator socket's long-polls (``send --wait``, ``inbox -f``, ``activity -f``): each
answers with what is new when it comes, and says where the next one starts, so a
follower misses nothing and sees nothing twice."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.client import RpcClient
from hyperhive.config import AgentConfig, HivePaths
from hyperhive.errors import NotFound
from hyperhive.protocol import (
    ActivityFeed,
    Message,
    OpActivityReq,
    OpAwaitReplyReq,
    OpInboxReq,
    OpSendReq,
    OpSetParentReq,
    ReplyWait,
)
from tests.support.hive import agent, agent_call, coordinator, operator, seed_home
from tests.support.stores import open_hive_store

pytestmark = pytest.mark.anyio

# Far longer than any answer here takes: a poll that was not woken would come back empty.
WAIT = 20.0


async def _from(
    paths: HivePaths, name: str, to: str, body: str, reply_to: int | None = None
) -> int:
    async with agent(paths, name) as client:
        fields: dict[str, Any] = {"to": to, "body": body}
        if reply_to is not None:
            fields["in_reply_to"] = reply_to
        sent = await agent_call(client, "send", **fields)
    assert isinstance(sent, dict)
    return int(sent["id"])


async def _parked_then(op: RpcClient, request: Any, then: Any) -> Any:
    """Make ``request`` (a long-poll), let it park, run ``then()``, return its answer."""
    result: list[Any] = []
    async with anyio.create_task_group() as tg:

        async def poll() -> None:
            result.append(await op.call(request))

        tg.start_soon(poll)
        await anyio.wait_all_tasks_blocked()
        await then()
    return result[0]


async def test_await_reply_answers_with_the_reply_to_that_message(tmp_path: Path) -> None:
    seed_home(tmp_path, {"alice": AgentConfig(), "bob": AgentConfig()})
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        first = (await op.call(OpSendReq(cmd="send", to="alice", body="one"))).id
        second = (await op.call(OpSendReq(cmd="send", to="alice", body="two"))).id
        none: ReplyWait = await op.call(
            OpAwaitReplyReq(cmd="await_reply", message_id=second, wait=0)
        )
        assert none.reply is None

        async def replies() -> None:
            # Mail to the operator that is not the reply, a reply to the other message,
            # then the reply.
            await _from(c.paths, "alice", "operator", "unrelated")
            await _from(c.paths, "alice", "operator", "re one", reply_to=first)
            await _from(c.paths, "alice", "operator", "re two", reply_to=second)

        got = await _parked_then(
            op, OpAwaitReplyReq(cmd="await_reply", message_id=second, wait=WAIT), replies
        )
        assert got.reply is not None
        assert (got.reply.body, got.reply.in_reply_to, got.reply.sender) == (
            "re two",
            second,
            "alice",
        )
        # The first reply stays the answer, whatever comes after it.
        await _from(c.paths, "alice", "operator", "re one, again", reply_to=first)
        again = await op.call(OpAwaitReplyReq(cmd="await_reply", message_id=first, wait=0))
        assert again.reply is not None and again.reply.body == "re one"

        not_ours = await _from(c.paths, "alice", "bob", "hi bob")
        with pytest.raises(NotFound, match=f"no message #{not_ours} from the operator"):
            await op.call(OpAwaitReplyReq(cmd="await_reply", message_id=not_ours, wait=0))


async def test_inbox_after_answers_with_new_mail_to_the_operator_only(tmp_path: Path) -> None:
    seed_home(tmp_path, {"alice": AgentConfig(), "bob": AgentConfig()})
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        old = await _from(c.paths, "alice", "operator", "old news")

        async def mail() -> None:
            await _from(c.paths, "alice", "bob", "not for the operator")
            await _from(c.paths, "bob", "operator", "fresh")

        new: list[Message] = await _parked_then(
            op, OpInboxReq(cmd="inbox", after=old, wait=WAIT), mail
        )
        assert [(m.sender, m.body) for m in new] == [("bob", "fresh")]
        # Nothing newer: an answer within the wait, empty.
        assert await op.call(OpInboxReq(cmd="inbox", after=new[-1].id, wait=0)) == []


async def test_activity_after_pages_forward_through_everything_new_once(tmp_path: Path) -> None:
    seed_home(tmp_path, {"alice": AgentConfig(), "bob": AgentConfig()})
    base = time.time() - 3600
    store = await open_hive_store(HivePaths(tmp_path))
    try:
        for i in range(30):
            await store.activity.record("turn", "alice", f"turn {i}", at=base + i)
    finally:
        await store.close()
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        whole: ActivityFeed = await op.call(OpActivityReq(cmd="activity", kind="turn", limit=500))
        assert [e.title for e in whole.items] == [f"turn {i}" for i in reversed(range(30))]
        assert whole.newest == whole.items[0].cursor and whole.older is None

        # From turn 4 on, ten at a time: the oldest ten newer than the cursor, each time.
        after = next(e.cursor for e in whole.items if e.title == "turn 4")
        seen: list[str] = []
        while True:
            step: ActivityFeed = await op.call(
                OpActivityReq(cmd="activity", kind="turn", limit=10, after=after, wait=0)
            )
            if not step.items:
                assert step.newest == after  # nothing new: go on from where it was
                break
            assert len(step.items) <= 10 and step.newest == step.items[0].cursor
            seen += [e.title for e in reversed(step.items)]
            after = step.newest or after
        assert seen == [f"turn {i}" for i in range(5, 30)]

        # A new message between agents, and a new activity-log event (a reparent), each
        # wake a parked follower.
        newest = after

        async def message() -> None:
            await _from(c.paths, "alice", "bob", "hello bob")

        got = await _parked_then(
            op, OpActivityReq(cmd="activity", after=newest, wait=WAIT), message
        )
        assert [(e.kind, e.title, e.body) for e in got.items] == [
            ("message", "alice → bob", "hello bob")
        ]

        async def reparent() -> None:
            await op.call(OpSetParentReq(cmd="set_parent", child="bob", new_parent="alice"))

        logged = await _parked_then(
            op,
            OpActivityReq(cmd="activity", kind="reparent", after=got.newest, wait=WAIT),
            reparent,
        )
        assert [e.title for e in logged.items] == ["bob moved: (root) → alice"]
