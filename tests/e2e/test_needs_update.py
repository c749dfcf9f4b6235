"""needs_update: a claude upgraded in place under a running agent, with the real claude CLI.

The hive's ``claude_bin`` is a wrapper around the real claude whose ``--version``
says what the test wrote into it; replacing the wrapper with one that says
another version is what an upgrade in place does to the file (a second claude
release cannot be installed offline). The agent's manager gets the event, the
operator sees the flag (``hivectl agents list``, its ``--json``, the
dashboard), and a restart brings the agent to the new version.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.config import AgentConfig
from hyperhive.permissions import ToolGroup
from tests.e2e.test_metrics import dashboard_client
from tests.support.hive import agent_env, op_call, operator, running_hive, seed_home
from tests.support.model_server import ModelServer, text
from tests.support.procs import agent_rows, hivectl
from tests.support.surfaces import until, until_async

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(240)]

OLD, NEW = "2.1.328", "2.1.999"


def _wrapper(path: Path, real: Path, version: str) -> None:
    """A claude that runs ``real`` but says ``version``: a new file, like an upgrade."""
    tmp = path.with_suffix(".new")
    tmp.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then echo "{version} (Claude Code)"; exit 0; fi\n'
        f'exec {real} "$@"\n'
    )
    tmp.chmod(0o755)
    os.replace(tmp, path)


async def _rows(home: Path) -> dict[str, dict[str, Any]]:
    return await anyio.to_thread.run_sync(lambda: agent_rows(home))


async def _todos(c: Any, agent: str) -> list[str]:
    return [t.body for t in await c.store.loose_ends.todos(agent) if t.key == "needs_update:w1"]


async def test_a_claude_upgraded_under_a_running_agent_flags_it_until_a_restart(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    model_server.set_script(lambda body: text("noted"))
    env = agent_env(model_server.url)
    seed_home(
        tmp_path,
        {
            "queen": AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT), env=env),
            "w1": AgentConfig(env=env),
        },
        {"queen": None, "w1": "queen"},
        hive_toml="dashboard_port = 0\n",
    )
    wrapper = tmp_path / "claude-wrapper"
    _wrapper(wrapper, claude_bin, OLD)
    async with running_hive(tmp_path, wrapper) as (c, host), dashboard_client(c) as http:
        await until(lambda: {"queen", "w1"} <= set(host.agents))

        async def recorded() -> dict[str, dict[str, Any]] | None:
            rows = await _rows(tmp_path)
            return rows if all(r["versions"] for r in rows.values()) else None

        rows = await until_async(recorded, 60)
        assert rows["w1"]["versions"]["claude"] == OLD and rows["w1"]["needs_update"] is None

        _wrapper(wrapper, claude_bin, NEW)  # upgraded in place, under the running agents

        async def flagged() -> dict[str, dict[str, Any]] | None:
            rows = await _rows(tmp_path)
            return rows if rows["w1"]["needs_update"] else None

        rows = await until_async(flagged, 60)
        assert rows["w1"]["needs_update"] == f"claude {OLD} → {NEW}"
        assert rows["w1"]["versions"]["claude"] == OLD  # what it started on, still
        listed = await anyio.to_thread.run_sync(lambda: hivectl(tmp_path, "agents", "list"))
        assert (
            f"w1 needs update: its host now runs claude {OLD} → {NEW}; "
            "`hivectl agents restart w1` brings it up to date"
        ) in listed.stdout
        # Its manager is told once, as a todo it can act on.
        [todo] = await until_async(lambda: _todos(c, "queen"), 30)
        assert todo == (
            f"[needs_update] w1 runs older versions than its host now has (claude {OLD} → "
            f"{NEW}). Restart w1 when its work allows; that brings it up to date."
        )
        # The operator sees it on the agent's row of the tree and on the agent's page.
        tree = (await http.get("/tree")).text
        page = (await http.get("/agents/w1")).text
        assert f"its host now runs claude {OLD} → {NEW}" in tree
        assert "needs update" in page and "hivectl agents restart w1" in page

        old = host.agents["w1"]
        async with operator(c.paths) as op:
            await op_call(op, "agent_restart", agent="w1")

        async def caught_up() -> dict[str, dict[str, Any]] | None:
            rows = await _rows(tmp_path)
            w1 = rows["w1"]
            fresh = host.agents.get("w1") not in (None, old)
            return rows if fresh and w1["versions"]["claude"] == NEW else None

        rows = await until_async(caught_up, 120)
        assert rows["w1"]["needs_update"] is None
        assert await _todos(c, "queen") == []
        listed = await anyio.to_thread.run_sync(lambda: hivectl(tmp_path, "agents", "list"))
        assert "w1 needs update" not in listed.stdout
