"""No credentials and stopping: the real claude CLI against the scripted model server.

An agent whose claude says "Not logged in" takes no more turns until the
hive's credentials change (``hivectl login``), and a graceful stop cuts any
backoff short.
"""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from hyperhive.config import AgentConfig
from hyperhive.credentials import credentials_file
from hyperhive.names import OPERATOR
from tests.support.hive import agent_env, op_call, operator, running_hive, seed_home
from tests.support.model_server import ApiError, ModelServer, always, text, tool_call
from tests.support.procs import hivectl
from tests.support.surfaces import until

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(120)]


def _turns(rt: Any) -> int:
    return sum(1 for e in rt.bus.history if e["kind"] == "turn_start")


async def test_no_credentials_holds_the_agent_until_hivectl_login(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"):
        monkeypatch.delenv(key, raising=False)  # the host passes these through
    env = {k: v for k, v in agent_env(model_server.url).items() if k != "ANTHROPIC_API_KEY"}
    seed_home(tmp_path, {"alice": AgentConfig(env=env)})
    model_server.set_script(
        [tool_call("mcp__hyperhive__send", {"to": "operator", "body": "pong"}), text("done")]
    )
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        rt = host.agents["alice"]
        async with operator(c.paths) as op:
            await op_call(op, "send", to="alice", body="ping")
        await until(lambda: rt.turns.needs_login)
        # A window longer than the first two backoffs (1 s + 2 s): a retry loop would
        # have started more turns by now; a held agent has not.
        await anyio.sleep(3.5)
        assert rt.turns.needs_login and _turns(rt) == 1
        assert not model_server.main_requests  # claude never reached the model

        listed = await anyio.to_thread.run_sync(lambda: hivectl(tmp_path, "agents", "list"))
        row = next(line for line in listed.stdout.splitlines() if line.startswith("alice"))
        assert "needs login" in row and "idle" not in row
        assert "hivectl login" in listed.stdout and "CLAUDE_CODE_OAUTH_TOKEN" in listed.stdout

        login = await anyio.to_thread.run_sync(
            lambda: subprocess.run(
                [sys.executable, "-m", "hyperhive", "--home", str(tmp_path), "login"],
                input="test-key\n",
                capture_output=True,
                text=True,
                timeout=60,
            )
        )
        assert login.returncode == 0, login.stderr
        assert stat.S_IMODE(credentials_file(c.paths).stat().st_mode) == 0o600

        # The held turn's mail comes back and the agent answers, with the new key.
        async def replied() -> bool:
            async with operator(c.paths) as op:
                rows = await op_call(op, "inbox")
            assert isinstance(rows, list)
            return any(isinstance(r, dict) and r.get("body") == "pong" for r in rows)

        with anyio.fail_after(60):
            while True:
                arrived = c.notifier.event(OPERATOR)
                if await replied():
                    break
                await arrived.wait()
        assert model_server.main_requests[0].headers.get("x-api-key") == "test-key"
        assert _turns(rt) == 2 and not rt.turns.needs_login
        # The clean turn's end clears the coordinator's flag (agents list, dashboard).
        with anyio.fail_after(30):
            while True:
                async with operator(c.paths) as op:
                    agents = await op_call(op, "agents")
                assert isinstance(agents, list)
                alice = next(a for a in agents if isinstance(a, dict) and a["name"] == "alice")
                if alice["needs_login"] is False:
                    break
                await anyio.sleep(0.05)


async def test_a_graceful_stop_cuts_a_redelivery_backoff_short(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    model_server.set_script(always(ApiError(529, "overloaded_error", "Overloaded")))
    seed_home(tmp_path, {"alice": AgentConfig(env=agent_env(model_server.url))})
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        rt = host.agents["alice"]
        async with operator(c.paths) as op:
            await op_call(op, "send", to="alice", body="work")
        await until(lambda: (rt.bus.last_turn or {}).get("outcome") == "api_error")
        turns = _turns(rt)
        # Far below the host's grace (120 s): a stop must not wait out backoffs, nor
        # start new turns (re-attaching would unfence the inbox and redeliver).
        with anyio.fail_after(20):
            await host.deactivate("alice")
            await rt.lifetime.done.wait()  # the harness may close its socket before the fence lands
        assert "alice" not in host.agents
        assert _turns(rt) == turns
        async with operator(c.paths) as op:
            views = await op_call(op, "messages", agent="alice")
        assert isinstance(views, dict)
        assert not views["inbox"][0]["acked"]  # the failed turn's mail waits for the next run
