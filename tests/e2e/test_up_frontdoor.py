"""``hivectl up``'s console at start: a busy dashboard port said beside the URL, a
one-click log-in link that really logs in (and ``hivectl dashboard`` for a fresh one),
and an open-files limit too low for the hive."""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_up import Up
from tests.support.hive import hivectl_env
from tests.support.procs import hivectl, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        yield int(taken.getsockname()[1])


def _logs_in(link: str) -> None:
    with httpx.Client() as browser_like:
        entered = browser_like.get(link)
        assert entered.status_code == 303 and entered.headers["location"] == "/"
        base = link.split("/login?")[0]
        assert browser_like.get(f"{base}/api/agents").status_code == 200
        again = httpx.get(link)
        assert again.status_code == 401 and "already been used" in again.text


def test_up_says_the_port_was_busy_and_prints_a_working_login_link(
    tmp_path: Path, claude_bin: Path, busy_port: int
) -> None:
    (tmp_path / "hive.toml").write_text(
        f'claude_bin = "{claude_bin}"\nruntime = "unsandboxed"\ndashboard_port = {busy_port}\n'
    )
    # A record left by an earlier run must not be announced as this one's.
    (tmp_path / "run").mkdir(mode=0o700)
    stale = {"url": "http://127.0.0.1:1", "pid": 1, "requested_port": 1, "busy": None}
    (tmp_path / "run" / "dashboard.json").write_text(json.dumps(stale))
    up = Up(tmp_path)
    try:
        url_line = up.wait_for(lambda: next((x for x in up.lines if "dashboard: " in x), None))
        url = url_line.split("dashboard: ", 1)[1]
        assert url.startswith("http://127.0.0.1:") and url != stale["url"]
        assert url != f"http://127.0.0.1:{busy_port}"
        assert up.wait_for(lambda: up.saw(f"port {busy_port} was busy"))
        link_line = up.wait_for(lambda: next((x for x in up.lines if "log in:" in x), None))
        link = link_line.split("log in:", 1)[1].strip()
        assert link.startswith(f"{url}/login?code=")
        token = (tmp_path / "run" / "dashboard-token").read_text().strip()
        assert not up.saw(token)
        _logs_in(link)

        fresh = json.loads(hivectl(tmp_path, "dashboard", "--json").stdout)
        assert fresh["url"] == url and fresh["busy"] and fresh["requested_port"] == busy_port
        assert fresh["login_url"] != link
        _logs_in(fresh["login_url"])
        human = hivectl(tmp_path, "dashboard").stdout
        assert f"port {busy_port} was busy" in human and "log in:    " in human

        up.wait_for(lambda: up.saw("agent queen: up"))  # supervising: Ctrl-C is handled
        up.proc.send_signal(signal.SIGINT)
        assert up.proc.wait(timeout=60) == 0, up.lines
    finally:
        if up.proc.poll() is None:
            os.killpg(up.proc.pid, signal.SIGKILL)
            up.proc.wait()
        up._reader.join(timeout=5)
        if up.proc.stdout is not None:
            up.proc.stdout.close()
    gone = hivectl(tmp_path, "dashboard", check=False)
    assert gone.returncode == 3 and "not serving" in gone.stderr


def _low_fd_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))


def test_up_with_a_hard_fd_limit_below_the_hives_need_says_what_to_raise(
    tmp_path: Path, claude_bin: Path
) -> None:
    (tmp_path / "hive.toml").write_text(
        f'claude_bin = "{claude_bin}"\nruntime = "unsandboxed"\ndashboard_port = 0\n'
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "hyperhive", "--home", str(tmp_path), "up"],
        env=hivectl_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=_low_fd_limit,
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("agent queen: up"):  # supervising: Ctrl-C is handled now
                break
        console = "".join(lines)
        assert "warning:   the open-files limit is too low for 1 agent(s)" in console, console
        assert "hard limit (RLIMIT_NOFILE) is 200" in console
        assert "ulimit -n 1024" in console and "LimitNOFILE=1024" in console
        # The coordinator says so in its own log too (for `hivectl serve` alone).
        log = tmp_path / "logs" / "coordinator.log"
        wait_until(lambda: "open-files limit is too low" in log.read_text(), what="fd warning")
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
        assert code == 0, console + proc.stdout.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
