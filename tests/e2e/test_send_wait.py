"""``hivectl send NAME TEXT --wait``: the way to script an agent from a shell or CI.

A real hive (coordinator, agent host, the real claude CLI) whose scripted model
answers each message from the operator with the ``send`` tool, replying to that
message's id; ``send --wait`` prints that reply and nothing else.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.config import AgentConfig
from tests.support.hive import agent_env, hivectl_env, running_hive, seed_home
from tests.support.model_server import Answer, ModelServer, text, tool_call
from tests.support.surfaces import until

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(300)]

REPLY_WITHIN = "150"  # seconds: a bound on the test (a turn of the real claude on 2 cores)
_FROM_OPERATOR = re.compile(r"\[msg #(\d+)\] from operator")


def _answer_each_message(body: dict[str, Any]) -> Answer:
    """Reply to the operator's newest message with ``pong #<its id>``, then end the turn."""
    messages = body.get("messages", [])
    users = [m for m in messages if m.get("role") == "user"]
    if users and '"tool_result"' in json.dumps(users[-1]):
        return text("replied")
    ids = [int(i) for i in _FROM_OPERATOR.findall(json.dumps(messages))]
    assert ids, "no message from the operator in the wake"
    msg = max(ids)
    return tool_call(
        "mcp__hyperhive__send", {"to": "operator", "body": f"pong #{msg}", "in_reply_to": msg}
    )


def _hivectl(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hyperhive", "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=240,
        env=hivectl_env(home),
    )


async def test_send_wait_prints_the_reply_to_that_message(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    model_server.set_script(_answer_each_message)
    seed_home(tmp_path, {"queen": AgentConfig(env=agent_env(model_server.url))})
    async with running_hive(tmp_path, claude_bin) as (c, _host):
        await until(lambda: c.hostlink.running("queen"), 60)

        out = await anyio.to_thread.run_sync(
            _hivectl,
            tmp_path,
            "send",
            "queen",
            "ping",
            "--wait",
            "--timeout",
            REPLY_WITHIN,
            "--json",
        )
        assert out.returncode == 0, out.stderr
        first = json.loads(out.stdout)
        reply = first["reply"]
        assert (reply["from"], reply["to"]) == ("queen", "operator")
        assert (reply["in_reply_to"], reply["body"]) == (first["id"], f"pong #{first['id']}")

        # Plain: the reply's text alone on stdout, for `answer=$(hivectl send … --wait)`.
        out = await anyio.to_thread.run_sync(
            _hivectl, tmp_path, "send", "queen", "ping again", "--wait", "--timeout", REPLY_WITHIN
        )
        assert out.returncode == 0, out.stderr
        answered = int(out.stdout.removeprefix("pong #").strip())
        assert out.stdout == f"pong #{answered}\n" and answered > first["id"]
        asked = await c.store.messages.get(answered)
        assert asked is not None
        assert (asked.sender, asked.recipient, asked.body) == ("operator", "queen", "ping again")
        assert len(model_server.main_requests) == 4  # two turns of two model calls each
