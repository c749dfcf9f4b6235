"""``hivectl up`` as the operator runs it: one command, supervised, stoppable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hyperhive.config import HivePaths
from hyperhive.homelock import holder
from hyperhive.unixsock import is_listening
from tests.support.hive import SERVE_START_WITHIN_S, hivectl_env
from tests.support.model_server import ModelServer, text, tool_call
from tests.support.procs import hivectl, process_gone, wait_until

# A hang guard: two hives may start in one test, each allowed SERVE_START_WITHIN_S.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


class Up:
    """A running ``hivectl up`` whose output lines are collected as they come."""

    def __init__(
        self, home: Path, env: dict[str, str] | None = None, argv: list[str] | None = None
    ) -> None:
        """``argv``: how ``up`` is run (default: this Python's ``-m hyperhive``)."""
        self.home = home
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            argv or [sys.executable, "-m", "hyperhive", "--home", str(home), "up"],
            env=env or hivectl_env(home),
            cwd="/" if argv else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, check: Callable[[], Any], within: float = SERVE_START_WITHIN_S) -> Any:
        # The hive's start bound by default: several of these waits span a serve's start
        # (imports, the store, a host's), which a loaded machine took over 45 s for.
        def held() -> Any:
            value = check()
            if not value and self.proc.poll() is not None:
                raise AssertionError(f"hivectl up exited early: {self.lines}")
            return value

        try:
            return wait_until(held, within)
        except TimeoutError:
            raise TimeoutError(f"condition not met; output so far: {self.lines}") from None

    def saw(self, fragment: str) -> bool:
        return any(fragment in line for line in self.lines)

    def agents(self) -> list[dict[str, Any]]:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "hyperhive",
                "--home",
                str(self.home),
                "agents",
                "list",
                "--json",
            ],
            capture_output=True,
            text=True,
            env=hivectl_env(self.home),
            timeout=30,
        )
        return json.loads(out.stdout) if out.returncode == 0 else []


def _hive_toml(home: Path, claude_bin: Path) -> None:
    (home / "hive.toml").write_text(
        f'claude_bin = "{claude_bin}"\nruntime = "unsandboxed"\ndashboard_port = 0\n'
    )


def _finish(running: Up) -> None:
    if running.proc.poll() is None:
        os.killpg(running.proc.pid, signal.SIGKILL)
        running.proc.wait()
    running._reader.join(timeout=5)
    if running.proc.stdout is not None:
        running.proc.stdout.close()
    # Whatever a test left behind (it asserts on these itself): never leak a hive.
    for pid in (_coordinator_pid(running.home), _host_pid(running.home)):
        if pid and pid > 0 and not process_gone(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def up(tmp_path: Path, claude_bin: Path) -> Iterator[Up]:
    _hive_toml(tmp_path, claude_bin)
    running = Up(tmp_path)
    try:
        yield running
    finally:
        _finish(running)


def _coordinator_pid(home: Path) -> int | None:
    """The live ``hivectl serve`` of ``home``, found by its command line (not by its lock)."""
    want = ["--home", str(home), "serve"]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
        except OSError:
            continue
        if argv[-3:] == want and "hyperhive" in argv and not process_gone(int(entry.name)):
            return int(entry.name)
    return None


def _host_pid(home: Path) -> int | None:
    try:
        return int(json.loads((home / "run" / "agent-host.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


def test_up_starts_everything_restarts_a_dead_host_and_stops_cleanly(up: Up) -> None:
    # The banner's lines reach the reader thread one by one: wait for its last one.
    up.wait_for(lambda: up.saw("logs:"))
    assert up.saw("dashboard: http://127.0.0.1:")
    assert up.saw("spawned the root manager 'queen'")
    up.wait_for(lambda: up.saw("agent queen: up"))
    queen = next(a for a in up.agents() if a["name"] == "queen")
    assert queen["running"] and queen["parent"] is None

    first_host = up.wait_for(lambda: _host_pid(up.home))
    os.kill(first_host, signal.SIGKILL)
    up.wait_for(lambda: up.saw("host exited"))
    second_host = up.wait_for(lambda: (p := _host_pid(up.home)) != first_host and p)
    assert second_host != first_host
    up.wait_for(lambda: any(a["running"] for a in up.agents() if a["name"] == "queen"))

    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(timeout=60) == 0, up.lines
    up._reader.join(timeout=5)
    assert up.saw("hyperhive stopped")
    assert not (up.home / "run" / "host.sock").exists()
    with pytest.raises(ProcessLookupError):
        os.kill(second_host, 0)


def _running(up: Up) -> tuple[int, int]:
    """(coordinator pid, host pid) once the hive's root agent is up."""
    up.wait_for(lambda: up.saw("agent queen: up"))
    return up.wait_for(lambda: _coordinator_pid(up.home)), up.wait_for(lambda: _host_pid(up.home))


def test_children_die_with_up_even_when_it_is_killed(up: Up, claude_bin: Path) -> None:
    coordinator, host = _running(up)
    os.kill(up.proc.pid, signal.SIGKILL)  # no chance to stop anything itself
    up.proc.wait()
    wait_until(lambda: process_gone(coordinator), 30, "coordinator gone after up's death")
    wait_until(lambda: process_gone(host), 60, "host gone after up's death")
    # The home is free again: a new up starts a fresh hive on it.
    again = Up(up.home)
    try:
        assert _running(again)[0] != coordinator
    finally:
        _finish(again)


def test_a_closed_terminal_stops_the_hive(up: Up) -> None:
    coordinator, host = _running(up)
    up.proc.send_signal(signal.SIGHUP)
    assert up.proc.wait(timeout=60) == 0, up.lines
    assert process_gone(coordinator) and process_gone(host)


# On PostgreSQL a second serve on a held home stands by for failover instead of
# refusing (tests/chaos/test_failover.py): the refusal below is SQLite's.
@pytest.mark.sqlite_only
def test_a_held_home_is_refused_naming_the_holder(up: Up) -> None:
    coordinator, host = _running(up)
    assert holder(HivePaths(up.home), "coordinator") == coordinator
    second = hivectl(up.home, "--home", str(up.home), "up", check=False)
    assert second.returncode != 0
    assert "already in use" in second.stderr and f"pid {coordinator}" in second.stderr
    assert "hyperhive: home" not in second.stdout  # refused before starting anything
    serve = hivectl(up.home, "--home", str(up.home), "serve", check=False)
    assert serve.returncode != 0 and f"coordinator runs as pid {coordinator}" in serve.stderr
    host_again = hivectl(up.home, "--home", str(up.home), "host", check=False)
    assert host_again.returncode != 0 and f"host runs as pid {host}" in host_again.stderr
    # The running hive is untouched.
    assert not process_gone(coordinator) and not process_gone(host)
    assert any(a["name"] == "queen" and a["running"] for a in up.agents())


def test_a_failed_start_leaves_nothing_running(tmp_path: Path, claude_bin: Path) -> None:
    _hive_toml(tmp_path, claude_bin)
    # A directory where the root agent's socket goes: the coordinator's part of the spawn
    # fails. (Agents' own directories are the host's since #14: a bad one there makes the
    # agent crash and be restarted with backoff, not the start fail.)
    (tmp_path / "run" / "agents" / "queen.sock" / "x").mkdir(parents=True)
    failed = Up(tmp_path)
    try:
        assert failed.proc.wait(timeout=90) != 0
        failed._reader.join(timeout=5)
        out = "\n".join(failed.lines)
        # What failed, the exception's text and where the log is; not a bare name.
        assert "internal error in 'spawn': IsADirectoryError: [Errno 21]" in out, out
        assert f"{tmp_path / 'logs' / 'coordinator.log'}" in out
        assert _coordinator_pid(tmp_path) is None, out  # no coordinator left running
        assert holder(HivePaths(tmp_path), "coordinator") is None  # nobody holds the home
        # Nothing serves the operator's or the hosts' socket, and their files are gone:
        # the coordinator, stopped while it was still starting, cleaned up after itself.
        for sock in ("host.sock", "hosts.sock"):
            assert not is_listening(tmp_path / "run" / sock)
            assert not (tmp_path / "run" / sock).exists(), sock
    finally:
        _finish(failed)


@pytest.mark.skipif(os.geteuid() != 0, reason="agent users (and so traversal) need root")
def test_a_home_agent_users_cannot_reach_is_refused_before_anything(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    closed.chmod(0o700)
    home = closed / "hive"
    out = hivectl(tmp_path, "--home", str(home), "up", check=False)
    assert out.returncode != 0
    assert f"{closed} is not traversable by other users" in out.stderr, out.stderr
    assert not home.exists()  # nothing created, so nothing started


def test_the_console_says_needs_login_and_login_resumes_the_agent(
    tmp_path: Path, claude_bin: Path, model_server: ModelServer
) -> None:
    model_server.set_script(
        [tool_call("mcp__hyperhive__send", {"to": "operator", "body": "hello"}), text("done")]
    )
    _hive_toml(tmp_path, claude_bin)
    env = hivectl_env(tmp_path)
    for key in ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"):
        env.pop(key, None)
    env["ANTHROPIC_BASE_URL"] = model_server.url  # passed through to the agents
    running = Up(tmp_path, env)
    try:
        running.wait_for(lambda: running.saw("agent queen: up"))
        hivectl(tmp_path, "send", "queen", "are you there?")
        running.wait_for(lambda: running.saw("agent queen: needs login"))
        assert running.saw("hivectl login") and running.saw("CLAUDE_CODE_OAUTH_TOKEN")
        login = subprocess.run(
            [sys.executable, "-m", "hyperhive", "--home", str(tmp_path), "login"],
            input="test-key\n",
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert login.returncode == 0, login.stderr
        running.wait_for(lambda: running.saw("agent queen: up (logged in)"))
        assert model_server.main_requests[0].headers.get("x-api-key") == "test-key"
    finally:
        _finish(running)
