"""What the agents must run, checked by ``hivectl up`` before it starts and by each agent
before each turn: a claude or a Python out of the agents' users' reach is said, with the
remedy, instead of every turn failing with ``bwrap: execvp claude``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_up import Up, _finish
from tests.support.claude_link import linked_claude
from tests.support.hive import hivectl_env
from tests.support.model_server import ModelServer, text, tool_call
from tests.support.procs import hivectl, hivectl_json

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="agents' own users need root")
SYSUSERS = pytest.mark.xdist_group("sysusers")  # one worker for every test making users


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A temp dir other users can traverse, as a bubblewrapped hive's home must be."""
    path = Path(tempfile.mkdtemp(prefix="hh-install-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _model_env(home: Path, model_server: ModelServer) -> dict[str, str]:
    env = hivectl_env(home)
    env["ANTHROPIC_BASE_URL"] = model_server.url
    env["ANTHROPIC_API_KEY"] = "test-key"
    return env


@AS_ROOT
def test_up_refuses_a_claude_the_agents_cannot_run(open_dir: Path, claude_bin: Path) -> None:
    home = open_dir / "hive"
    home.mkdir()
    with linked_claude(claude_bin) as claude:
        claude.parent.chmod(0o700)
        (home / "hive.toml").write_text(f'claude_bin = "{claude}"\ndashboard_port = 0\n')
        out = hivectl(home, "--home", str(home), "up", check=False)
    assert out.returncode != 0
    assert f"claude at {claude} cannot be run by the agents' users" in out.stderr, out.stderr
    assert f"{claude.parent} (on the way to it) is mode 0o700" in out.stderr
    assert f"hivectl --home {home} install-claude" in out.stderr
    assert "hyperhive: home" not in out.stdout  # refused before anything started
    assert not (home / "run").exists() and not (home / "hive.db").exists()


@AS_ROOT
def test_up_refuses_a_python_the_agents_cannot_run(open_dir: Path, claude_bin: Path) -> None:
    home = open_dir / "hive"
    home.mkdir()
    (home / "hive.toml").write_text(f'claude_bin = "{claude_bin}"\ndashboard_port = 0\n')
    # This venv seen through a 0700 directory: what a venv under /root is to agents.
    closed = open_dir / "root-like"
    closed.mkdir(mode=0o700)
    closed.chmod(0o700)
    (closed / "venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    out = subprocess.run(
        [str(closed / "venv" / "bin" / "python"), "-m", "hyperhive", "up"],
        env=hivectl_env(home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0
    assert "the Python hyperhive runs on" in out.stderr, out.stderr
    assert f"{closed} (on the way to it) is mode 0o700" in out.stderr
    assert "/opt/hyperhive" in out.stderr
    assert not (home / "run").exists()


@AS_ROOT
@SYSUSERS
def test_an_agent_whose_claude_goes_out_of_reach_says_so_then_answers(
    open_dir: Path, claude_bin: Path, model_server: ModelServer
) -> None:
    model_server.set_script(
        [tool_call("mcp__hyperhive__send", {"to": "operator", "body": "hello"}), text("done")]
    )
    home = open_dir / "hive"
    home.mkdir()
    with linked_claude(claude_bin) as claude:
        (home / "hive.toml").write_text(f'claude_bin = "{claude}"\ndashboard_port = 0\n')
        running = Up(home, _model_env(home, model_server))
        try:
            running.wait_for(lambda: running.saw("agent queen: up"))
            claude.parent.chmod(0o700)  # e.g. an upgrade that left it root's alone
            hivectl(home, "send", "queen", "are you there?")
            running.wait_for(lambda: running.saw("agent queen: cannot run claude:"))
            assert running.saw("install-claude")
            queen = next(a for a in hivectl_json(home, "agents", "list") if a["name"] == "queen")
            assert f"claude at {claude} cannot be run" in queen["launch_problem"]
            listed = hivectl(home, "agents", "list").stdout
            assert "cannot run claude" in listed and "install-claude" in listed
            assert model_server.main_requests == []  # held: no turn was tried

            claude.parent.chmod(0o755)
            running.wait_for(lambda: running.saw("agent queen: up (claude runs again)"))
            inbox = running.wait_for(
                lambda: [m for m in hivectl_json(home, "inbox") if m["body"] == "hello"]
            )
            assert inbox[0]["from"] == "queen"
            queen = next(a for a in hivectl_json(home, "agents", "list") if a["name"] == "queen")
            assert queen["launch_problem"] is None
            log = (home / "logs" / "agents" / "queen.log").read_text()
            assert "execvp" not in log  # no turn failed in the sandbox meanwhile
        finally:
            _finish(running)


def test_doctor_on_a_running_hive_sees_its_host_and_dashboard(
    tmp_path: Path, claude_bin: Path
) -> None:
    (tmp_path / "hive.toml").write_text(
        f'claude_bin = "{claude_bin}"\nruntime = "unsandboxed"\ndashboard_port = 0\n'
    )
    running = Up(tmp_path)
    try:
        running.wait_for(lambda: running.saw("agent queen: up"))
        out = subprocess.run(
            [sys.executable, "-m", "hyperhive", "doctor", "--json"],
            env={**hivectl_env(tmp_path), "ANTHROPIC_API_KEY": "test-key"},
            capture_output=True,
            text=True,
            timeout=180,
        )
        checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
        hosts = [c for name, c in checks.items() if name.startswith("host ")]
        assert len(hosts) == 1 and hosts[0]["status"] == "ok", checks
        assert "linked (epoch" in hosts[0]["detail"] and "no lease" in hosts[0]["detail"]
        assert "1 agent(s)" in hosts[0]["detail"]
        assert checks["dashboard"]["status"] == "ok"
        assert checks["dashboard"]["detail"].startswith("serving at http://127.0.0.1:")
        assert checks["store"]["status"] == "ok"
        assert out.returncode == 0, out.stderr
    finally:
        _finish(running)
