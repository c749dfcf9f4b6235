"""10,000+ random and malformed frames at an agent socket: no crash, no leak."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.client import connect
from hyperhive.config import AgentConfig
from hyperhive.framing import FrameDecoder
from hyperhive.unixsock import connect_unix
from tests.support.hive import agent, agent_call, coordinator, op_call, operator, seed_home
from tests.support.stores import read_hive

pytestmark = pytest.mark.anyio

FRAMES = 10_000

VALID = [
    {"cmd": "send", "to": "bob", "body": "hi"},
    {"cmd": "send", "to": "<parent>", "body": "hi", "in_reply_to": 1},
    {"cmd": "recv", "max": 3},
    {"cmd": "ack_until", "up_to": 10**6},
    {"cmd": "wait", "timeout": 0},
    {"cmd": "remind", "message": "r", "delay_seconds": 3600},
    {"cmd": "get_loose_ends", "agent": "bob"},
    {"cmd": "cancel_loose_end", "kind": "reminder", "row_id": 1},
    {"cmd": "todo_upsert", "subsystem": "s", "key": "k", "body": "b"},
    {"cmd": "todo_clear", "subsystem": "s", "key": "k"},
    {"cmd": "set_status", "text": "ok"},
    {"cmd": "get_agent_meta", "name": "bob"},
    {"cmd": "wake", "from": "matrix", "body": "x"},
    {"cmd": "compact"},
    {"cmd": "ask_operator", "question": "q"},
    {"cmd": "set_parent", "child": "alice", "new_parent": None},
    {"cmd": "spawn", "name": "evil"},
]
JUNK: list[Any] = [
    None,
    True,
    -1,
    2**70,
    1.5e308,
    "",
    "x" * 300,
    "ünï\u0000code",
    [],
    {},
    [1, [2]],
    {"nested": {"deep": [None]}},
    "operator",
    "bob",
    "../../etc/passwd",
    "*",
]


def _frame(rng: random.Random) -> bytes:
    roll = rng.random()
    if roll < 0.15:
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 80))).replace(b"\n", b" ")
    base = dict(rng.choice(VALID))
    if roll < 0.55:
        for _ in range(rng.randint(1, 3)):
            key = rng.choice([*base.keys(), "from", "id", "agent", "extra", "cmd"])
            base[key] = rng.choice(JUNK)
    if base.get("cmd") == "wait":
        base["timeout"] = 0  # a long-poll would only hold this connection's own slots
    text = json.dumps(base)
    if rng.random() < 0.1:
        cut = rng.randint(0, len(text))
        text = text[:cut]
    return text.encode("utf-8", "surrogatepass")


async def test_random_frames_never_crash_or_touch_other_agents(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    seed_home(
        tmp_path,
        {"queen": AgentConfig(), "alice": AgentConfig(), "bob": AgentConfig()},
        {"queen": None, "alice": "queen", "bob": "queen"},
        store_url=hive_store_url,
    )
    rng = random.Random(1130)
    async with coordinator(tmp_path) as c:
        async with agent(c.paths, "bob") as bob, operator(c.paths) as op:
            await agent_call(bob, "remind", message="bob's", delay_seconds=3600)
            await op_call(op, "send", to="bob", body="for bob")
            await agent_call(bob, "set_status", text="bob status")

        async def snapshot() -> dict[str, list[Any]]:
            hive = await read_hive(c.paths)
            return {
                "messages": [m for m in hive.messages if m.sender != "alice"],
                "reminders": [r for r in hive.reminders if r.agent != "alice"],
                "state": [a for a in hive.agents if a.name != "alice"],
            }

        before = await snapshot()
        stream = await connect_unix(c.paths.agent_sock("alice"))
        # PostgreSQL: a round trip per stored frame; a quarter of them keeps the suite's time.
        frames = [_frame(rng) for _ in range(FRAMES if hive_store_url is None else FRAMES // 4)]
        frames.append(b"{" + b"x" * (c.config.max_frame_bytes + 10))  # oversized
        expected = sum(1 for f in frames if f.strip())
        responses: list[dict[str, Any]] = []

        async def reader() -> None:
            decoder = FrameDecoder(1 << 22)
            while len(responses) < expected:
                chunk = await stream.receive(1 << 16)
                for line in decoder.feed(chunk):
                    assert isinstance(line, bytes)
                    responses.append(json.loads(line))

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                tg.start_soon(reader)
                for f in frames:
                    await stream.send(f + b"\n")
        await stream.aclose()
        assert len(responses) == expected
        errors = {r["error"]["code"] for r in responses if not r["ok"]}
        assert {"malformed_frame", "unknown_command", "frame_too_large"} <= errors
        assert not errors & {"hive_error", "internal_error"}, "an internal error escaped"
        # Other agents' rows are untouched and the coordinator still answers.
        after = await snapshot()
        assert after["reminders"] == before["reminders"]
        assert after["state"] == before["state"]
        assert after["messages"][: len(before["messages"])] == before["messages"]
        async with connect(c.paths.agent_sock("bob")) as bob:
            meta = await agent_call(bob, "get_agent_meta")
            assert isinstance(meta, dict) and meta["status_text"] == "bob status"
