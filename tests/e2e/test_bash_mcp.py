"""The ``bash`` surface through the agent host's real HTTP MCP endpoint.

A real coordinator and agent host; the agent's harness runs the real claude
against the scripted model server (a todo wakes a turn), and every tool call
here goes over HTTP with the mcp SDK client and the agent's own token.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from anyio import CancelScope
from anyio.abc import TaskGroup, TaskStatus

from hyperhive.agent.host import AgentHost
from hyperhive.agent.sandbox import process_identity
from hyperhive.config import AgentConfig, HivePaths
from hyperhive.core.coordinator import Coordinator
from hyperhive.permissions import ToolGroup
from tests.support.hive import agent_env, hive_config, host_config, seed_home
from tests.support.model_server import ModelServer, always, text
from tests.support.surfaces import eventually, loose_todos, result_text, surface_client, until

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(120)]


def _seed(home: Path, model: ModelServer, **agents: AgentConfig) -> HivePaths:
    model.set_script(always(text("noted")))  # the turns todos wake just end
    configs = {n: c.model_copy(update={"env": agent_env(model.url)}) for n, c in agents.items()}
    return seed_home(home, configs)


async def start_host(tg: TaskGroup, home: Path, host_id: str) -> tuple[AgentHost, CancelScope]:
    """An agent host in ``tg`` under a scope of its own: cancelling it is the host exiting."""
    # Without the admin credentials the coordinator's hive.toml names (issue #14).
    host = AgentHost(HivePaths(home), host_config(home), host_id=host_id)
    scope = CancelScope()

    async def run(*, task_status: TaskStatus[None]) -> None:
        with scope:
            await host.run(task_status=task_status)

    await tg.start(run)
    return host, scope


@asynccontextmanager
async def coordinator_and_host(
    home: Path, claude_bin: Path, extra_toml: str = ""
) -> AsyncIterator[tuple[AgentHost, CancelScope, TaskGroup]]:
    """Coordinator and one agent host; the task group lets a test start a second host."""
    # Unsandboxed: pytest's tmp dirs are 0700, unreachable to agent users.
    (home / "hive.toml").write_text(
        f'claude_bin = "{claude_bin}"\nruntime = "unsandboxed"\n{extra_toml}'
    )
    coord = await Coordinator.open(HivePaths(home), hive_config(home))
    async with anyio.create_task_group() as tg:
        await tg.start(coord.run)
        host, scope = await start_host(tg, home, "test-host")
        try:
            yield host, scope, tg
        finally:
            with anyio.move_on_after(10):
                await host.stop_all(graceful=False)
            tg.cancel_scope.cancel()


def _bash_ready(host: AgentHost, name: str) -> bool:
    """Its bash tasks are served: the host lists an agent only once it is whole."""
    return host.agent(name) is not None


async def test_run_inline_started_completion_todo_and_status_clearing(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    paths = _seed(tmp_path, model_server, alice=AgentConfig())
    async with coordinator_and_host(tmp_path, claude_bin) as (host, _scope, _tg):
        await until(lambda: _bash_ready(host, "alice"))
        async with surface_client(host, "alice", "bash") as bash:
            listed = {t.name for t in (await bash.list_tools()).tools}
            assert listed == {"run", "status", "kill"}

            quick = await bash.call_tool("run", {"cmd": "echo hello; echo oops >&2; exit 3"})
            body = result_text(quick)
            assert not quick.is_error, body
            assert body.startswith("task ") and ": done, exit_code 3" in body
            assert "hello" in body and "oops" in body
            # Ended inside the window: its todo was filed and cleared again.
            assert await eventually(paths, "alice", "bash", lambda todos: not todos) == {}

            slow = await bash.call_tool(
                "run", {"cmd": "sleep 0.3; echo late", "wait_seconds": 0, "name": "slow"}
            )
            assert result_text(slow).startswith("task started: id=slow")
            todos = await eventually(
                paths, "alice", "bash", lambda t: "done (exit 0)" in t.get("slow", "")
            )
            assert "Read(" in todos["slow"] and "slow.out" in todos["slow"]
            seen = result_text(await bash.call_tool("status", {"id": "slow"}))
            assert "task slow: done, exit_code 0" in seen and "late" in seen
            assert "slow" not in await loose_todos(paths, "alice", "bash")


async def test_kill_timeout_name_reuse_and_bad_input(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    _seed(tmp_path, model_server, alice=AgentConfig())
    async with coordinator_and_host(tmp_path, claude_bin) as (host, _scope, _tg):
        await until(lambda: _bash_ready(host, "alice"))
        async with surface_client(host, "alice", "bash") as bash:
            started = await bash.call_tool(
                "run",
                {"cmd": "sleep 300 & sleep 300; wait", "wait_seconds": 0, "name": "sleeper"},
            )
            assert result_text(started).startswith("task started: id=sleeper")
            again = await bash.call_tool("run", {"cmd": "true", "name": "sleeper"})
            assert again.is_error and "still" in result_text(again)

            killed = await bash.call_tool("kill", {"id": "sleeper"})
            assert "SIGINT" in result_text(killed) and "process group" in result_text(killed)
            seen = result_text(
                await bash.call_tool("status", {"id": "sleeper", "wait_seconds": 15})
            )
            assert "task sleeper: killed" in seen
            reused = await bash.call_tool("run", {"cmd": "echo reused", "name": "sleeper"})
            assert "task sleeper: done" in result_text(reused) and "reused" in result_text(reused)

            timed = await bash.call_tool(
                "run", {"cmd": "sleep 30", "timeout_secs": 0.3, "wait_seconds": 15}
            )
            assert ": timed_out" in result_text(timed)

            for args, why in [
                ({"cmd": "   "}, "empty"),
                ({"cmd": "true", "name": "Not_Valid"}, "[a-z0-9-]"),
                ({"cmd": "true", "timeout_secs": -1}, "positive"),
                ({"cmd": "true", "wait_seconds": -1}, "0 or more"),
                ({"command": "true"}, "bad arguments"),
            ]:
                bad = await bash.call_tool("run", args)
                assert bad.is_error and why in result_text(bad), (args, result_text(bad))
            missing = await bash.call_tool("status", {"id": "nope"})
            assert missing.is_error and "no bash task 'nope'" in result_text(missing)


async def test_execution_gate_and_a_disabled_entry_are_enforced_server_side(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    disabled = AgentConfig.model_validate({"mcp_servers": {"bash": {"enabled": False}}})
    _seed(
        tmp_path,
        model_server,
        bob=AgentConfig(tool_groups=[ToolGroup.MESSAGING, ToolGroup.META]),
        carol=disabled,
    )
    async with coordinator_and_host(tmp_path, claude_bin) as (host, _scope, _tg):
        await until(lambda: {"bob", "carol"} <= set(host.agents) and _bash_ready(host, "bob"))
        async with surface_client(host, "bob", "bash") as bash:
            assert (await bash.list_tools()).tools == []
            refused = await bash.call_tool("run", {"cmd": "touch /tmp/should-not-exist"})
            assert refused.is_error
            assert "'execution' tool group" in result_text(refused)
        async with surface_client(host, "carol", "bash") as bash:
            assert (await bash.list_tools()).tools == []
            refused = await bash.call_tool("run", {"cmd": "true"})
            assert refused.is_error and "disabled" in result_text(refused)
            assert "[mcp_servers.bash]" in result_text(refused)
        assert not (host.agents["bob"].bash_tasks.dir / "tasks.json").exists()


async def test_a_host_restart_marks_running_tasks_interrupted_with_a_todo(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    paths = _seed(tmp_path, model_server, alice=AgentConfig())
    async with coordinator_and_host(tmp_path, claude_bin) as (first, first_scope, tg):
        await until(lambda: "alice" in first.agents)
        async with surface_client(first, "alice", "bash") as bash:
            started = await bash.call_tool(
                "run", {"cmd": "sleep 300", "wait_seconds": 0, "name": "long"}
            )
            assert result_text(started).startswith("task started: id=long")
        await eventually(paths, "alice", "bash", lambda t: "running" in t.get("long", ""))
        table = first.agents["alice"].bash_tasks.table_path
        record = next(r for r in json.loads(table.read_text())["tasks"] if r["id"] == "long")
        assert process_identity(record["pid"]) == record["identity"]

        # The first host exits (cancelled: its agents' services end with it) and a
        # second one registers; the coordinator activates alice there.
        first_scope.cancel()
        await until(lambda: process_identity(record["pid"]) is None)
        second, second_scope = await start_host(tg, tmp_path, "second-host")
        try:
            await until(lambda: "alice" in second.agents, within=30)
            todos = await eventually(
                paths, "alice", "bash", lambda t: "interrupted" in t.get("long", "")
            )
            assert "agent host stopped" in todos["long"]
            async with surface_client(second, "alice", "bash") as bash:
                seen = result_text(await bash.call_tool("status", {"id": "long"}))
            assert "task long: interrupted" in seen
            await eventually(paths, "alice", "bash", lambda t: "long" not in t)
        finally:
            with anyio.move_on_after(10):
                await second.stop_all(graceful=False)
            second_scope.cancel()
