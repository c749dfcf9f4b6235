"""``hivectl up`` as the operator runs it: one command, supervised, stoppable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.hive import hivectl_env

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


class Up:
    """A running ``hivectl up`` whose output lines are collected as they come."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hyperhive", "--home", str(home), "up"],
            env=hivectl_env(home),
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

    def wait_for(self, check: Callable[[], Any], within: float = 45.0) -> Any:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            value = check()
            if value:
                return value
            if self.proc.poll() is not None:
                raise AssertionError(f"hivectl up exited early: {self.lines}")
            time.sleep(0.05)
        raise TimeoutError(f"condition not met; output so far: {self.lines}")

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


@pytest.fixture
def up(tmp_path: Path, claude_bin: Path) -> Iterator[Up]:
    (tmp_path / "hive.toml").write_text(
        f'claude_bin = "{claude_bin}"\nruntime = "unsandboxed"\ndashboard_port = 0\n'
    )
    running = Up(tmp_path)
    try:
        yield running
    finally:
        if running.proc.poll() is None:
            os.killpg(running.proc.pid, signal.SIGKILL)
            running.proc.wait()
        running._reader.join(timeout=5)
        if running.proc.stdout is not None:
            running.proc.stdout.close()


def _host_pid(home: Path) -> int | None:
    try:
        return int(json.loads((home / "run" / "agent-host.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


def test_up_starts_everything_restarts_a_dead_host_and_stops_cleanly(up: Up) -> None:
    up.wait_for(lambda: up.saw("dashboard: http://127.0.0.1:"))
    assert up.saw("spawned the root manager 'queen'")
    assert up.saw("logs:")
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
