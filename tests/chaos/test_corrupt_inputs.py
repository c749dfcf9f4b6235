"""Corrupt files on disk: each degrades safely, and the log names the file and the fix.

- a hand-broken ``meta/topology.json`` in an older home: adopted as a tree
  of roots (spec 004's "missing / unparsable file → every agent treated as
  root"); once adopted the file is only the store's mirror, rewritten at
  start;
- an adopted ``agent.toml`` in ``meta/agents`` with a TOML syntax error: that agent
  is marked broken (file and line) and never started, the others run, and
  mail for it still queues;
- a truncated or garbage bash task table: moved aside, the agent starts with
  an empty table and its bash tasks work;
- a truncated or garbage ``hive.db``: ``hivectl serve`` refuses to start
  with one clear error naming the file and what to do, instead of serving on
  a guess.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.bash.records import TaskRecord, TaskTable
from hyperhive.bash.tasks import TASKS_SUBDIR
from hyperhive.config import AgentConfig, HivePaths
from hyperhive.protocol import SendReq
from tests.support.hive import (
    agent,
    agent_call,
    coordinator,
    hivectl_env,
    op_call,
    operator,
    running_hive,
    seed_home,
)
from tests.support.surfaces import until

pytestmark = [pytest.mark.timeout(120)]

TREE = {"alice": None, "bob": "alice", "carol": "alice", "dave": None}


def _logged(caplog: pytest.LogCaptureFixture, *fragments: str) -> list[str]:
    """Log lines (WARNING or worse) holding every fragment."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and all(f in r.getMessage() for f in fragments)
    ]


@pytest.mark.anyio
async def test_a_broken_topology_makes_every_agent_a_root(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    paths = seed_home(tmp_path, {n: AgentConfig() for n in TREE})
    paths.topology.write_text('{"alice": null, "bob": "alice",\n  "carol": ')  # by hand
    caplog.set_level(logging.WARNING)
    # An older home adopted with a broken file: every agent a root, written down so.
    async with coordinator(tmp_path):
        assert json.loads(paths.topology.read_text()) == dict.fromkeys(TREE)
        async with agent(paths, "dave") as dave:
            await dave.call(SendReq(cmd="send", to="bob", body="hi"))  # siblings: roots
        async with operator(paths) as op:
            assert await op_call(op, "topology") == dict.fromkeys(TREE)
    assert _logged(caplog, str(paths.topology), "not valid JSON", "Fix the file")

    # Once adopted, the file is the store's mirror: breaking it breaks nothing.
    caplog.clear()
    paths.topology.write_text("{ this is not json")
    async with coordinator(tmp_path):
        assert json.loads(paths.topology.read_text()) == dict.fromkeys(TREE)
        async with agent(paths, "dave") as dave:
            await dave.call(SendReq(cmd="send", to="carol", body="hi"))
    assert not _logged(caplog, "not valid JSON")


@pytest.mark.anyio
async def test_a_broken_agent_toml_marks_that_agent_broken_and_starts_the_others(
    tmp_path: Path, claude_bin: Path, caplog: pytest.LogCaptureFixture
) -> None:
    paths = seed_home(
        tmp_path,
        {
            "alice": AgentConfig(),
            "bob": 'tool_groups = ["messaging"\nsystem_prompt = "unterminated\n',
            "carol": AgentConfig(),
        },
    )
    caplog.set_level(logging.WARNING)
    async with running_hive(tmp_path, claude_bin) as (coord, host):
        await until(lambda: {"alice", "carol"} <= set(host.agents))
        assert "bob" not in host.agents
        async with operator(paths) as op:
            rows: Any = {row["name"]: row for row in await op_call(op, "agents")}
            assert rows["alice"]["running"] and rows["carol"]["running"]
            assert not rows["bob"]["running"]
            assert str(paths.applied_config("bob")) in rows["bob"]["broken"]
            sent: Any = await op_call(op, "send", to="bob", body="for when you are fixed")
            assert sent["to"] == "bob"  # mail still queues for a broken agent
        assert "bob" not in host.agents
    [line] = _logged(caplog, "agent bob has a broken config", str(paths.applied_config("bob")))
    assert ":2:" in line or ":1:" in line, line  # the line of the error
    assert "apply it, then restart it" in line


@pytest.mark.anyio
@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: data[: len(data) // 2], id="truncated"),
        pytest.param(lambda data: os.urandom(len(data)), id="garbage"),
    ],
)
async def test_a_corrupt_bash_task_table_is_moved_aside(
    tmp_path: Path,
    claude_bin: Path,
    caplog: pytest.LogCaptureFixture,
    damage: Any,
) -> None:
    paths = seed_home(tmp_path, {"alice": AgentConfig()})
    tasks_dir = paths.agent_state("alice") / TASKS_SUBDIR
    tasks_dir.mkdir(parents=True)
    table = tasks_dir / "tasks.json"
    records = [TaskRecord(id=f"t{i}", cmd="true", created_at=1.0, status="done") for i in range(9)]
    original = TaskTable(tasks=records).model_dump_json().encode()
    damaged = damage(original)
    table.write_bytes(damaged)
    caplog.set_level(logging.WARNING)
    async with running_hive(tmp_path, claude_bin) as (_coord, host):
        await until(lambda: "alice" in host.agents and host.agents["alice"].bash_tasks)
        tasks = host.agents["alice"].bash_tasks
        assert tasks is not None
        report: Any = await tasks.run("echo still works", wait_seconds=10)
        assert report.status == "done" and "still works" in report.stdout_tail
    [aside] = tasks_dir.glob("tasks.json.corrupt-*")
    assert aside.read_bytes() == damaged  # moved, not rewritten: the evidence is kept
    [line] = _logged(caplog, str(table), "unreadable", str(aside))
    assert "inspect the copy, then delete it" in line
    assert [t.id for t in TaskTable.model_validate_json(table.read_bytes()).tasks] == [report.id]


def _real_db(home: Path) -> bytes:
    """A hive.db with some rows, as a stopped coordinator leaves it."""
    db = sqlite3.connect(home / "hive.db")
    db.executescript(
        "CREATE TABLE t(x); "
        + "".join(f"INSERT INTO t VALUES ('{'x' * 500}');" for _ in range(200))
    )
    db.close()
    return (home / "hive.db").read_bytes()


@pytest.mark.sqlite_only  # a corrupt hive.db file
@pytest.mark.parametrize("kind", ["truncated", "garbage"])
def test_a_corrupt_hive_db_stops_the_coordinator_with_the_file_and_the_fix(
    tmp_path: Path, kind: str
) -> None:
    paths = seed_home(tmp_path, {"alice": AgentConfig()}, hive_toml="dashboard_port = 0\n")
    _serve_once(tmp_path)  # a real database, migrated and with rows
    data = paths.db.read_bytes() if paths.db.stat().st_size > 8192 else _real_db(tmp_path)
    for suffix in ("-wal", "-shm"):
        Path(f"{paths.db}{suffix}").unlink(missing_ok=True)
    paths.db.write_bytes(data[: len(data) // 3] if kind == "truncated" else os.urandom(len(data)))

    proc = subprocess.run(
        [sys.executable, "-m", "hyperhive", "serve"],
        env=hivectl_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0, "the coordinator served on a corrupt hive.db"
    assert str(paths.db) in proc.stderr, proc.stderr
    assert "move it aside and restart" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr  # one clear line, not a crash dump


def _serve_once(home: Path) -> None:
    """Run the coordinator briefly and stop it, as an operator's first start would."""

    async def main() -> None:
        paths = HivePaths(home)
        async with coordinator(home), operator(paths) as op:
            for i in range(50):
                await op_call(op, "send", to="alice", body=f"row {i} " + "x" * 400)
            async with agent(paths, "alice") as alice:
                await agent_call(alice, "recv", max=5)

    anyio.run(main)
