"""A claude that dies in the middle of a tool call: the host drops the call it was serving.

When claude is killed while ``run`` (or ``status``) waits for its task, its
connection to the host's MCP endpoint closes. Nobody will read the answer, so
the task's end must stay a loose end: a todo that wakes the agent
(``TaskManager.run`` files one when its call is cancelled; a cancelled
``status`` clears none). The calls are raw HTTP POSTs as claude sends them
(the fast path's exchange), closed mid-call the way a killed process's socket is.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from hyperhive.agent.active import ActiveAgent
from hyperhive.bash.records import TaskTable
from hyperhive.bash.tasks import TASKS_SUBDIR
from hyperhive.config import AgentConfig, HivePaths
from tests.e2e.test_mcp_fastpath import call, headers
from tests.support.hive import agent_env, running_hive, seed_home
from tests.support.model_server import ModelServer, always, text
from tests.support.surfaces import loose_todos, until

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]


class _Claude:
    """alice's claude on her bash surface: POSTs, some of them cut off mid-call."""

    def __init__(self, base_url: str, agent: ActiveAgent) -> None:
        self.url = f"{base_url}/agents/alice/mcp/bash"
        self.auth = {"authorization": f"Bearer {agent.token}"}

    async def call(self, tool: str, arguments: dict[str, Any]) -> httpx.Response:
        async with httpx.AsyncClient(timeout=60) as http:
            body = call(tool, arguments)
            return await http.post(self.url, json=body, headers={**headers(tool), **self.auth})

    async def killed_during(
        self, tool: str, arguments: dict[str, Any], begun: Callable[[], bool]
    ) -> None:
        """Call ``tool``; once ``begun()``, hang up, as a killed claude's socket does."""
        async with anyio.create_task_group() as claude:
            claude.start_soon(self.call, tool, arguments)
            await until(begun)
            claude.cancel_scope.cancel()


async def _start(tmp_path: Path, model_server: ModelServer) -> tuple[Path, HivePaths]:
    model_server.set_script(always(text("noted")))  # the turn the todo wakes just ends
    home = tmp_path / "hive"
    home.mkdir()
    return home, seed_home(home, {"alice": AgentConfig(env=agent_env(model_server.url))})


async def test_a_task_whose_caller_hung_up_mid_run_ends_as_a_waking_todo(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    home, paths = await _start(tmp_path, model_server)
    begun, gate = tmp_path / "begun", tmp_path / "gate"
    cmd = f"touch {begun}; while [ ! -e {gate} ]; do sleep 0.01; done; echo ok"
    async with running_hive(home, claude_bin) as (_coord, host):
        agent = await until(lambda: host.agents.get("alice"))
        claude = _Claude(host.base_url, agent)
        # The task runs and run() waits inline for it when claude is killed.
        await claude.killed_during(
            "run", {"cmd": cmd, "wait_seconds": 25, "name": "cut"}, begun.exists
        )
        # The task then ends well inside run()'s window, but nobody is left to read it.
        gate.touch()
        await until(lambda: _synced(agent, "cut"), within=60)
        todos = await loose_todos(paths, "alice", "bash")
        assert todos.get("cut", "").startswith("bash task cut done (exit 0)"), todos


async def test_a_status_whose_caller_hung_up_mid_wait_leaves_the_todo(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    home, paths = await _start(tmp_path, model_server)
    gate = tmp_path / "gate"
    cmd = f"while [ ! -e {gate} ]; do sleep 0.01; done; echo ok"
    async with running_hive(home, claude_bin) as (_coord, host):
        agent = await until(lambda: host.agents.get("alice"))
        claude = _Claude(host.base_url, agent)
        started = await claude.call("run", {"cmd": cmd, "wait_seconds": 0, "name": "bg"})
        assert "task started" in started.text, started.text
        settled = agent.bash_tasks._entries["bg"].ended

        def waiting() -> bool:  # status() waits on the task's end (nothing else does)
            return settled.statistics().tasks_waiting > 0

        await claude.killed_during("status", {"id": "bg", "wait_seconds": 25}, waiting)
        gate.touch()
        await until(lambda: _synced(agent, "bg"), within=60)
        todos = await loose_todos(paths, "alice", "bash")
        assert todos.get("bg", "").startswith("bash task bg done (exit 0)"), todos


def _synced(agent: ActiveAgent, task_id: str) -> bool:
    """The task ended, and its end settled with the coordinator (a todo filed, or none owed)."""
    table = agent.state_dir / TASKS_SUBDIR / "tasks.json"
    tasks = TaskTable.model_validate_json(table.read_bytes()).tasks
    return any(t.id == task_id and t.status == "done" and t.todo_synced for t in tasks)
