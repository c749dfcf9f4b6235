"""hivectl against a real `hivectl serve` process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from hyperhive.cli import main
from hyperhive.config import AgentConfig, HivePaths, load_agent_config
from hyperhive.permissions import ToolGroup
from tests.support.hive import hivectl_env, seed_home, start_serve


def hivectl(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hyperhive", "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=hivectl_env(home),
    )


@pytest.fixture
def hive(tmp_path: Path, hive_store_url: str | None) -> Iterator[Path]:
    seed_home(
        tmp_path,
        {"queen": AgentConfig(), "alice": AgentConfig(), "bob": AgentConfig()},
        {"queen": None, "alice": "queen", "bob": None},
        store_url=hive_store_url,
    )
    proc = start_serve(tmp_path)
    try:
        yield tmp_path
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, (tmp_path / "serve.log").read_text()
    # A clean stop removes the sockets it made.
    assert not HivePaths(tmp_path).host_sock.exists()


def test_serve_stopped_while_it_still_starts_exits_cleanly_and_leaves_no_socket(
    tmp_path: Path,
) -> None:
    # SIGTERM as soon as the sockets answer: the dashboard (seconds to import on a busy
    # machine) is most likely still loading. A signal then used to kill the process
    # outright, its socket files left behind.
    paths = seed_home(tmp_path, {"alice": AgentConfig()}, hive_toml="dashboard_port = 0\n")
    proc = start_serve(tmp_path)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0, (tmp_path / "serve.log").read_text()
    left = [p for p in (paths.host_sock, paths.hosts_sock, paths.agent_sock("alice")) if p.exists()]
    assert not left, left


def test_send_inbox_reply_and_json_shapes(hive: Path) -> None:
    out = hivectl(hive, "send", "alice", "hello there")
    assert out.returncode == 0 and "sent #1 to alice" in out.stdout
    listed = json.loads(hivectl(hive, "agents", "list", "--json").stdout)
    assert {a["name"] for a in listed} == {"queen", "alice", "bob"}
    for row in listed:
        assert {"name", "parent", "running", "turn_state", "status_text"} <= set(row)
    assert next(a for a in listed if a["name"] == "alice")["parent"] == "queen"
    assert json.loads(hivectl(hive, "inbox", "--json").stdout) == []
    tree = hivectl(hive, "agents", "tree").stdout.splitlines()
    assert tree.index("○ queen  stopped  ") < tree.index("  ○ alice  stopped  ")


def test_set_parent_requires_exactly_one_of_parent_or_root(hive: Path) -> None:
    neither = hivectl(hive, "agents", "set-parent", "bob")
    assert neither.returncode != 0 and "exactly one" in neither.stderr
    both = hivectl(hive, "agents", "set-parent", "bob", "--parent", "queen", "--root")
    assert both.returncode != 0
    moved = hivectl(hive, "agents", "set-parent", "bob", "--parent", "alice")
    assert moved.returncode == 0 and "bob is now under alice" in moved.stdout
    again = hivectl(hive, "agents", "set-parent", "bob", "--parent", "alice")
    assert "already under alice" in again.stdout
    cycle = hivectl(hive, "agents", "set-parent", "queen", "--parent", "bob")
    assert cycle.returncode == 5  # refused
    assert cycle.stderr.strip().startswith("hivectl: moving 'queen' under 'bob' would make a cycle")
    assert len(cycle.stderr.strip().splitlines()) == 1
    root = hivectl(hive, "agents", "set-parent", "bob", "--root")
    assert "bob is now at the root" in root.stdout


def test_errors_are_one_line_and_nonzero(hive: Path) -> None:
    out = hivectl(hive, "send", "nobody", "x")
    assert out.returncode == 4  # not found
    assert (
        out.stderr.strip()
        == "hivectl: no agent named 'nobody'; `hivectl agents list` shows the hive"
    )
    out = hivectl(hive, "questions", "answer", "99", "x")
    assert out.returncode == 4 and "no question #99" in out.stderr


def test_spawn_and_status(hive: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "worker.toml"
    cfg.write_text('tool_groups = ["messaging"]\n')
    out = hivectl(hive, "agents", "spawn", "worker", "--config", str(cfg), "--parent", "queen")
    assert out.returncode == 0, out.stderr
    assert "starts when an agent host connects" in out.stdout
    applied = load_agent_config(HivePaths(hive).applied_config("worker"))
    assert applied.tool_groups == [ToolGroup.MESSAGING]
    status = json.loads(hivectl(hive, "status", "--json").stdout)
    assert status["agents"] == 4 and status["running"] == 0 and status["hosts"] == []
    dup = hivectl(hive, "agents", "spawn", "worker")
    assert dup.returncode == 5 and "already exists" in dup.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("tool_groups = [\n")
    out = hivectl(hive, "agents", "spawn", "broken", "--config", str(bad))
    assert out.returncode == 1 and f"{bad}:1: not valid TOML" in out.stderr


def test_unreachable_coordinator_is_one_clear_line(tmp_path: Path) -> None:
    out = hivectl(tmp_path, "inbox")
    assert out.returncode == 3
    assert "is the coordinator running" in out.stderr and len(out.stderr.splitlines()) == 1


def _commands(group: click.Group, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    for name, cmd in group.commands.items():
        yield f"{prefix}{name}", cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, f"{prefix}{name} ")


def test_every_command_has_help() -> None:
    missing = [name for name, cmd in _commands(main) if not (cmd.help or "").strip()]
    assert not missing, f"commands without help: {missing}"
    read_commands = {"status", "inbox", "agents list", "agents tree", "questions list"}
    for name, cmd in _commands(main):
        if name in read_commands:
            assert any(p.name == "as_json" for p in cmd.params), f"{name} lacks --json"
