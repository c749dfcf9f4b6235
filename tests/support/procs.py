"""The hive as an operator runs it: ``hivectl serve`` and ``hivectl host`` as processes.

Everything here is synchronous and talks to the processes only through what
an operator has: the CLI, the sockets, the files under ``HIVE_HOME``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.hive import SERVE_START_WITHIN_S, hivectl_env
from tests.support.waits import wait_until

__all__ = [
    "ExecRecord",
    "agent_rows",
    "claude_wrapper",
    "exec_records",
    "group_gone",
    "hivectl",
    "hivectl_json",
    "log_tail",
    "process_gone",
    "start_host",
    "stop",
    "wait_until",
]


def hivectl(home: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``python -m hyperhive ARGS`` on ``home``, as an operator types it."""
    proc = subprocess.run(
        [sys.executable, "-m", "hyperhive", *args],
        env=hivectl_env(home),
        capture_output=True,
        text=True,
        timeout=60,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"hivectl {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc


def hivectl_json(home: Path, *args: str) -> Any:
    return json.loads(hivectl(home, *args, "--json").stdout)


def agent_rows(home: Path) -> dict[str, dict[str, Any]]:
    """``hivectl agents list --json``, keyed by agent name."""
    return {row["name"]: row for row in hivectl_json(home, "agents", "list")}


def start_host(home: Path) -> subprocess.Popen[bytes]:
    """``hivectl host`` as a real process; returns once its HTTP server listens."""
    info = home / "run" / "agent-host.json"
    info.unlink(missing_ok=True)
    with (home / "host.log").open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hyperhive", "host"],
            env=hivectl_env(home),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )

    def up() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"hivectl host exited {proc.returncode}:\n{log_tail(home)}")
        try:
            return bool(json.loads(info.read_text()).get("pid") == proc.pid)
        except (OSError, ValueError):
            return False

    try:
        wait_until(up, SERVE_START_WITHIN_S, "hivectl host listening")
    except BaseException:
        stop(proc)  # reaped here, not left to warn in whichever test runs next
        raise
    return proc


def log_tail(home: Path, name: str = "host.log", size: int = 3000) -> str:
    try:
        return (home / name).read_text(errors="replace")[-size:]
    except OSError:
        return ""


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL whatever is still running (teardown; the tests stop things themselves)."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


def claude_wrapper(directory: Path, real_claude: Path, record: Path) -> Path:
    """An executable that appends ``<pid> <wall clock>`` to ``record`` then execs claude.

    ``exec`` keeps the pid, so the recorded pid is claude's own (and its
    process group's, as the sandbox starts it in a new session); the time is
    bash's ``$EPOCHREALTIME``, read without forking.
    """
    path = directory / "claude-wrapper"
    path.write_text(
        "#!/bin/bash\n"
        f'printf "%s %s\\n" "$$" "$EPOCHREALTIME" >> {shlex.quote(str(record))}\n'
        f'exec {shlex.quote(str(real_claude))} "$@"\n'
    )
    path.chmod(0o755)
    return path


ExecRecord = tuple[int, float]


def exec_records(record: Path) -> list[ExecRecord]:
    """Every (pid, wall-clock time) the wrapper recorded, oldest first."""
    try:
        lines = record.read_text().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        pid, _, at = line.partition(" ")
        if pid and at:
            out.append((int(pid), float(at)))
    return out


def process_gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (gone, or a zombie nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat[stat.rindex(")") + 2 :].split()[0] in ("Z", "X")


def group_gone(pgid: int) -> bool:
    """True once no process of group ``pgid`` is left."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return all(process_gone(p) for p in _group_members(pgid))


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[2]) == pgid:
            members.append(int(entry.name))
    return members
