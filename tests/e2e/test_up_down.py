"""``hivectl down`` stops the hive ``hivectl up`` runs, from another terminal, as Ctrl-C
in up's would; and ``up`` shows what it waits for on a terminal, nothing of it on a pipe."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperhive.config import HivePaths
from hyperhive.homelock import holder
from tests.e2e.test_up import Up, _coordinator_pid, _finish, _hive_toml, _host_pid, _running
from tests.support.hive import SERVE_START_WITHIN_S, hivectl_env
from tests.support.procs import hivectl, process_gone, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture
def up(tmp_path: Path, claude_bin: Path) -> Iterator[Up]:
    _hive_toml(tmp_path, claude_bin)
    running = Up(tmp_path)
    try:
        yield running
    finally:
        _finish(running)


def _down(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hyperhive", "--home", str(home), "down", *args],
        capture_output=True,
        text=True,
        timeout=240,
        env=hivectl_env(home),
    )


def test_down_stops_a_running_hive_like_ctrl_c(up: Up) -> None:
    coordinator, host = _running(up)
    up_pid = up.proc.pid
    down = _down(up.home, "--json")
    assert down.returncode == 0, down.stderr
    assert json.loads(down.stdout) == {"home": str(up.home), "pid": up_pid, "forced": False}
    # down returned once up had gone: up's own goodbye, exit 0, nothing left running.
    assert up.proc.wait(timeout=5) == 0, up.lines
    up._reader.join(timeout=5)
    assert up.saw("stopping: agents finish their turns")
    assert up.lines[-1] == "hyperhive stopped"
    assert process_gone(coordinator) and process_gone(host)
    paths = HivePaths(up.home)
    assert all(holder(paths, role) is None for role in ("up", "coordinator", "host"))
    assert not paths.host_sock.exists()
    # Nothing left to stop: "not running" (3), and the home starts a new hive.
    again = _down(up.home)
    assert again.returncode == 3 and "no hive is running" in again.stderr


def test_down_while_up_still_starts_stops_it_cleanly(up: Up) -> None:
    up.wait_for(lambda: up.saw("hyperhive: home"))
    down = _down(up.home)
    assert down.returncode == 0, down.stderr
    assert down.stdout.strip() == f"stopped the hive on {up.home} (up, pid {up.proc.pid})"
    assert up.proc.wait(timeout=5) == 0, up.lines
    up._reader.join(timeout=5)
    assert up.lines[-1] == "hyperhive stopped"
    host = _host_pid(up.home)  # none if it never started
    assert _coordinator_pid(up.home) is None and (host is None or process_gone(host))
    paths = HivePaths(up.home)
    assert holder(paths, "coordinator") is None and holder(paths, "up") is None
    assert not paths.host_sock.exists()


class PtyUp:
    """``hivectl up`` on a pseudo-terminal, its output collected as it comes."""

    def __init__(self, home: Path) -> None:
        master, slave = os.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hyperhive", "--home", str(home), "up"],
            env=hivectl_env(home),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self.master = master
        self.text = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 4096)
            except OSError:
                return
            if not data:
                return
            self.text += data.decode(errors="replace")


def test_up_shows_what_it_waits_for_on_a_terminal_only(tmp_path: Path, claude_bin: Path) -> None:
    on_tty = tmp_path / "tty"
    on_tty.mkdir()
    _hive_toml(on_tty, claude_bin)
    term = PtyUp(on_tty)
    try:
        wait_until(lambda: "agent queen: up" in term.text, SERVE_START_WITHIN_S, term.text)
        assert hivectl(on_tty, "--home", str(on_tty), "down").returncode == 0
        assert term.proc.wait(timeout=30) == 0
        term._reader.join(timeout=5)
    finally:
        if term.proc.poll() is None:
            os.killpg(term.proc.pid, signal.SIGKILL)
            term.proc.wait()
        os.close(term.master)
    shown = term.text
    # Each wait drawn in place, then erased: the lines that stay are the usual ones.
    assert f"\r\x1b[Kwaiting for the coordinator to answer on {on_tty}/run/host.sock" in shown
    assert "\r\x1b[Kwaiting for the dashboard to serve" in shown
    kept = [ln for ln in shown.replace("\r\n", "\n").split("\n") if ln]
    visible = [ln.rsplit("\r\x1b[K", 1)[-1] for ln in kept]
    assert f"hyperhive: home {on_tty}" in visible
    assert "agent queen: up" in visible and visible[-1] == "hyperhive stopped"

    # The same up on a pipe: the usual lines, no progress drawn.
    piped = tmp_path / "piped"
    piped.mkdir()
    _hive_toml(piped, claude_bin)
    plain = Up(piped)
    try:
        plain.wait_for(lambda: plain.saw("agent queen: up"))
        assert hivectl(piped, "--home", str(piped), "down").returncode == 0
        assert plain.proc.wait(timeout=30) == 0
        plain._reader.join(timeout=5)
    finally:
        _finish(plain)
    assert not any("waiting for" in ln or "\r" in ln or "\x1b" in ln for ln in plain.lines)
    assert plain.lines[0] == f"hyperhive: home {piped}"
    assert plain.lines[-1] == "hyperhive stopped"
