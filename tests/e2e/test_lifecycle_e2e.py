"""Lifecycle end to end on the real claude CLI: spawning a child, bwrap turns, crash watch."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.config import AgentConfig
from hyperhive.permissions import ToolGroup
from hyperhive.sysusers import traversal_problem
from tests.support.hive import agent_env, op_call, operator, running_hive, seed_home
from tests.support.model_server import ModelServer, Reply, text, tool_call
from tests.support.sandboxed import traversable_home

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(120)]

MANAGER = AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))


def _last_user_text(body: dict[str, Any]) -> str:
    # claude may append a role "system" entry (its environment) after the user turn.
    users = [m for m in body["messages"] if m.get("role") == "user"]
    return json.dumps(users[-1] if users else {})


def _who(body: dict[str, Any]) -> str:
    # Our system prompt ("# You are <name>, an agent of a hyperhive") may land in
    # the system blocks or in a reminder inside the first user message.
    whole = json.dumps(body)
    for name in ("queen", "worker", "alice", "broken"):
        if f"You are {name}, an agent" in whole:
            return name
    return "?"


def _seed(home: Path, model: ModelServer, hive_toml: str = "", **agents: AgentConfig) -> None:
    configs = {n: c.model_copy(update={"env": agent_env(model.url)}) for n, c in agents.items()}
    seed_home(home, configs, hive_toml=hive_toml)


async def _messages(c: Any, name: str) -> list[dict[str, Any]]:
    async with operator(c.paths) as op:
        views = await op_call(op, "messages", agent=name)
    assert isinstance(views, dict)
    return list(views["inbox"])


async def eventually(check: Any, within: float = 60.0) -> Any:
    with anyio.fail_after(within):
        while True:
            value = await check()
            if value:
                return value
            await anyio.sleep(0.1)


async def test_a_manager_spawns_a_child_that_answers_through_its_parent(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The child's config says nothing about the API: like a real hive, it reaches the
    # model through the host's passthrough environment (hive.toml env_passthrough).
    for key, value in agent_env(model_server.url).items():
        monkeypatch.setenv(key, value)

    def script(body: dict[str, Any]) -> Reply:
        who, last = _who(body), _last_user_text(body)
        if '"tool_result"' in last:
            return text("ok")
        if who == "queen" and "spawn a worker" in last:
            return tool_call(
                "mcp__hyperhive__request_init_config",
                {"name": "worker", "config": 'tool_groups = ["messaging"]\n'},
            )
        if who == "queen" and "approval_resolved" in last:
            return tool_call("mcp__hyperhive__send", {"to": "worker", "body": "do the thing"})
        if who == "worker" and "from queen" in last:
            return tool_call("mcp__hyperhive__send", {"to": "<parent>", "body": "done: thing"})
        return text("noted")

    model_server.set_script(script)
    _seed(tmp_path, model_server, queen=MANAGER)
    async with running_hive(tmp_path, claude_bin) as (c, host):
        async with operator(c.paths) as op:
            await op_call(op, "send", to="queen", body="please spawn a worker")

            async def pending() -> Any:
                rows = await op_call(op, "approvals")
                return rows if isinstance(rows, list) and rows else None

            approvals = await eventually(pending)
            assert approvals[0]["subject"] == "worker" and approvals[0]["requester"] == "queen"
            await op_call(op, "approve", approval_id=approvals[0]["id"])
        assert c.topology_store.read_cached()["worker"] == "queen"

        async def reply_from_worker() -> Any:
            return [m for m in await _messages(c, "queen") if m["from"] == "worker"]

        replies = await eventually(reply_from_worker)
        assert replies[0]["body"] == "done: thing"
        assert "worker" in host.agents
        assert host.agents["worker"].groups == (ToolGroup.MESSAGING,)


@pytest.fixture
def open_home() -> Iterator[Path]:
    with traversable_home("hh-e2e-", ("alice",)) as path:
        yield path


@pytest.mark.skipif(os.geteuid() != 0, reason="per-agent users need root (CI runs as root)")
@pytest.mark.xdist_group("sysusers")  # one worker for every test making system users
async def test_a_turn_under_bubblewrap_as_the_agents_user(
    open_home: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    problem = traversal_problem(Path(os.path.realpath(claude_bin)))
    if problem is not None:
        pytest.skip(f"this checkout cannot be reached by an agent user: {problem}")
    model_server.set_script(
        [
            tool_call("mcp__hyperhive__send", {"to": "operator", "body": "from the sandbox"}),
            text("done"),
        ]
    )
    _seed(open_home, model_server, 'runtime = "bwrap"\n', alice=AgentConfig())
    async with running_hive(open_home, claude_bin, runtime="bwrap") as (c, host):
        with anyio.fail_after(30):
            while True:
                if "alice" in host.agents:
                    break
                await anyio.sleep(0.05)
        async with operator(c.paths) as op:
            await op_call(op, "send", to="alice", body="hello")

        async def replied() -> Any:
            async with operator(c.paths) as op:
                rows = await op_call(op, "inbox")
            return rows if isinstance(rows, list) and rows else None

        rows = await eventually(replied)
        assert rows[0]["body"] == "from the sandbox"
        rt = host.agents["alice"]
        assert rt.enclosure.isolation is not None and rt.enclosure.isolation.uid is not None
        session_dir = c.paths.agent_home("alice") / ".claude"
        assert session_dir.stat().st_uid == rt.enclosure.isolation.uid  # claude ran as the agent


async def test_a_crashing_harness_is_restarted_and_its_submitter_told(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    model_server.set_script(lambda body: text("ok"))
    broken = AgentConfig.model_validate({"mcp_servers": {"x": {"type": "stdio"}}})
    _seed(tmp_path, model_server, queen=MANAGER, broken=broken)
    async with running_hive(tmp_path, claude_bin) as (c, host):
        async with c.bus.subscribe() as events:
            async with operator(c.paths) as op:
                await op_call(op, "send", to="broken", body="wake up")
            crashed = restarted = False
            with anyio.fail_after(30):
                async for event in events:
                    if event["kind"] == "agent" and event.get("crashed"):
                        crashed = True
                    elif crashed and event["kind"] == "agent" and event.get("running"):
                        restarted = True
                        break
        assert crashed and restarted

        async def crash_notice() -> Any:
            return [m for m in await _messages(c, "queen") if "container_crash" in m["body"]]

        notices = await eventually(crash_notice)
        assert notices[0]["body"].startswith("[container_crash] broken crashed")
        view = next(a for a in await c.operator_api.agents_view() if a.name == "broken")
        assert view.crashed is None or "ConfigError" in view.crashed
