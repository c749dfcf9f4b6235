"""What real commands print under ``--json``, reads and writes, against docs/cli-json.md:
one document on stdout whose keys (and its rows', for a list) are the documented ones."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.config import AgentConfig, HivePaths
from tests.support.clidoc import read_doc
from tests.support.hive import agent, agent_call, hivectl_env, seed_home, start_serve

# Some forty hivectl processes, each seconds to start on a loaded machine.
pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def hive(tmp_path: Path) -> Iterator[Path]:
    seed_home(
        tmp_path,
        {"queen": AgentConfig(), "alice": AgentConfig()},
        {"queen": None, "alice": "queen"},
        hive_toml="dashboard_port = 0\n",
    )
    proc = start_serve(tmp_path)
    try:
        yield tmp_path
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, (tmp_path / "serve.log").read_text()


def _as_agent(home: Path, name: str, cmd: str, **fields: Any) -> Any:
    async def go() -> Any:
        async with agent(HivePaths(home), name) as client:
            return await agent_call(client, cmd, **fields)

    return anyio.run(go)


def test_each_command_prints_its_documented_shape(hive: Path) -> None:
    doc = read_doc()
    checked: set[str] = set()

    def prints(*args: str, stdin: str | None = None) -> Any:
        out = subprocess.run(
            [sys.executable, "-m", "hyperhive", "--home", str(hive), *args, "--json"],
            capture_output=True,
            text=True,
            timeout=90,
            env=hivectl_env(hive),
            input=stdin,
        )
        assert out.returncode == 0, (args, out.stderr)
        data = json.loads(out.stdout)
        command = "hivectl " + " ".join(a for a in args[:2] if not a.startswith("-"))
        if command not in doc.shapes:
            command = "hivectl " + args[0]
        shape = doc.shapes[command]
        model = shape.removeprefix("list[").removesuffix("]")
        rows = data if shape.startswith("list[") else [data]
        assert isinstance(rows, list) and rows, (command, data)
        for row in rows:
            assert set(row) == doc.tables[model], (command, sorted(row))
        checked.add(command)
        return data

    _as_agent(hive, "alice", "send", to="operator", body="hello operator")
    _as_agent(hive, "alice", "ask_operator", question="which branch?")

    prints("status")
    prints("agents", "list")
    prints("agents", "tree")
    prints("agents", "show", "alice")
    prints("agents", "spawn", "worker", "--parent", "queen")
    prints("agents", "set-parent", "worker", "--root")
    for verb in ("kill", "start", "restart", "update"):
        prints("agents", verb, "worker")
    prints("agents", "destroy", "worker", "--yes")
    prints("compact", "alice")
    prints("perms", "show", "alice")
    prints("budget")
    prints("budget", "set", "alice", "--usd-per-day", "5")
    prints("spend")
    prints("tools", "--groups", "messaging")
    sent = prints("send", "alice", "hi alice")
    assert sent["reply"] is None
    inbox = prints("inbox")
    prints("reply", str(inbox[0]["id"]), "thanks")
    question = prints("questions", "list")[0]
    prints("questions", "answer", str(question["id"]), "main")
    prints("activity")
    prints("hosts", "add", "h9")
    prints("hosts", "rotate", "h9")
    prints("hosts", "revoke", "h9")
    prints("hosts", "list")
    prints("dashboard")
    prints("login", stdin="a-test-key\n")
    # The rest need an agent host, a move, a stop, npm, or a machine doctor passes: their
    # own tests run them (test_cli_commands, test_move_progress, test_up_down,
    # test_doctor, test_turns_e2e, test_cli_interrupt); the unit test holds every
    # shape's keys to its model, which is what --json dumps.
    assert set(doc.shapes) - checked == {
        "hivectl agents move",
        "hivectl agents interrupt",
        "hivectl doctor",
        "hivectl install-claude",
        "hivectl approvals approve",
        "hivectl approvals deny",
        "hivectl approvals list",
        "hivectl approvals show",
        "hivectl down",
        "hivectl logs",
        "hivectl perms set",
        "hivectl turns list",
        "hivectl turns show",
        "hivectl turns search",
    }
