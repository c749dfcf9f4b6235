"""A claude that dies in the middle of a tool call: the host drops the call it was serving.

When claude is killed while ``run`` waits inline for its task, its connection
to the host's MCP endpoint closes. Nobody will read the inline answer, so the
task must come back as a loose end: a todo that wakes the agent once it ends
(``TaskManager.run`` files one when its call is cancelled). The call is a raw
HTTP POST as claude sends it (the fast path's exchange), closed mid-call the
way a killed process's socket is.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
import pytest

from hyperhive.bash.records import TaskTable
from hyperhive.bash.tasks import TASKS_SUBDIR
from hyperhive.config import AgentConfig
from tests.e2e.test_mcp_fastpath import call, headers
from tests.support.hive import agent_env, running_hive, seed_home
from tests.support.model_server import ModelServer, always, text
from tests.support.surfaces import loose_todos, until

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]


async def test_a_task_whose_caller_hung_up_mid_run_ends_as_a_waking_todo(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    model_server.set_script(always(text("noted")))  # the turn the todo wakes just ends
    home = tmp_path / "hive"
    home.mkdir()
    paths = seed_home(home, {"alice": AgentConfig(env=agent_env(model_server.url))})
    begun, gate = tmp_path / "begun", tmp_path / "gate"
    cmd = f"touch {begun}; while [ ! -e {gate} ]; do sleep 0.01; done; echo ok"
    async with running_hive(home, claude_bin) as (_coord, host):
        await until(lambda: "alice" in host.agents)
        rt = host.agents["alice"]
        url = f"{host.base_url}/agents/alice/mcp/bash"
        auth = {"authorization": f"Bearer {rt.token}"}
        async with httpx.AsyncClient(timeout=60) as http, anyio.create_task_group() as claude:
            body = call("run", {"cmd": cmd, "wait_seconds": 25, "name": "cut"})
            claude.start_soon(lambda: http.post(url, json=body, headers={**headers("run"), **auth}))
            await until(begun.exists)  # the task runs and run() waits inline for it
            claude.cancel_scope.cancel()  # claude is killed: its connection closes
        # The task then ends well inside run()'s window, but nobody is left to read it.
        gate.touch()
        table = rt.state_dir / TASKS_SUBDIR / "tasks.json"
        # Ended, and its end settled with the coordinator (a todo filed, or none owed).
        await until(lambda: _synced(table, "cut"), within=60)
        todos = await loose_todos(paths, "alice", "bash")
        assert todos.get("cut", "").startswith("bash task cut done (exit 0)"), todos


def _synced(table: Path, task_id: str) -> bool:
    tasks = TaskTable.model_validate_json(table.read_bytes()).tasks
    return any(t.id == task_id and t.status == "done" and t.todo_synced for t in tasks)
