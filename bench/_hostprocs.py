"""Processes for the agent-host benchmarks: ``hivectl host``, HTTP floors, a claude wrapper.

Like :mod:`bench._procs`, each server runs in its own process, so the
measuring client never shares an event loop (or a GIL) with what it measures.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hyperhive.config import HivePaths

__all__ = [
    "claude_wrapper",
    "exec_times",
    "host",
    "http_floor",
    "rss_bytes",
    "socket_fds",
]

START_TIMEOUT = 60.0


_PROFILED = """\
import cProfile, runpy, sys, time
out = sys.argv[1]
sys.argv = ["hyperhive", "host"]
profiler = cProfile.Profile(time.process_time)
profiler.enable()
try:
    runpy.run_module("hyperhive", run_name="__main__", alter_sys=True)
finally:
    profiler.disable()
    profiler.dump_stats(out)
"""


@contextmanager
def host(
    paths: HivePaths,
    *,
    profile: Path | None = None,
    wrap: Sequence[str] = (),
    start_timeout: float = START_TIMEOUT,
) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, Any]]]:
    """``python -m hyperhive host`` for the block; yields it and ``run/agent-host.json``.

    ``profile``: run it under cProfile timing CPU (not wall) time, so a loaded
    machine's scheduling waits don't drown the host's own work; the stats are
    written there when it stops. ``wrap``: a command the host runs under (valgrind).
    """
    info_path = paths.run / "agent-host.json"
    info_path.unlink(missing_ok=True)
    log_path = paths.home / "host.log"
    with log_path.open("ab") as log:
        command = [sys.executable, "-m", "hyperhive", "host"]
        if profile is not None:
            command = [sys.executable, "-c", _PROFILED, str(profile)]
        proc = subprocess.Popen(
            [*wrap, *command],
            env={**os.environ, "HIVE_HOME": str(paths.home)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                info = json.loads(info_path.read_text())
                if info.get("pid") == proc.pid:
                    break
            except (OSError, ValueError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"hivectl host did not come up\n{tail}")
            time.sleep(0.01)
        yield proc, info
    finally:
        _stop(proc)


@contextmanager
def http_floor(
    kind: str, scratch: Path, *, wrap: Sequence[str] = (), start_timeout: float = START_TIMEOUT
) -> Iterator[tuple[str, int]]:
    """:mod:`bench._http_floor` (``json`` or ``mcp``) for the block; yields its base URL
    and pid (for its CPU time). ``wrap``: a command it runs under (valgrind)."""
    port_file = scratch / f"{kind}.port"
    proc = subprocess.Popen(
        [*wrap, sys.executable, "-m", "bench._http_floor", kind, str(port_file)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + start_timeout
        while not (port_file.exists() and port_file.read_text()):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"bench._http_floor {kind} did not come up")
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port_file.read_text()}", proc.pid
    finally:
        _stop(proc)


def claude_wrapper(directory: Path, real_claude: str, record: Path) -> Path:
    """An executable recording ``<pid> <wall clock>`` in ``record``, then exec'ing claude.

    The time is bash's ``$EPOCHREALTIME`` (no fork); ``exec`` keeps the pid, so
    what follows is claude itself.
    """
    path = directory / "claude-wrapper"
    path.write_text(
        "#!/bin/bash\n"
        f'printf "%s %s\\n" "$$" "$EPOCHREALTIME" >> {shlex.quote(str(record))}\n'
        f'exec {shlex.quote(real_claude)} "$@"\n'
    )
    path.chmod(0o755)
    return path


def exec_times(record: Path) -> list[float]:
    """The wall-clock exec times the wrapper recorded, oldest first."""
    try:
        lines = record.read_text().splitlines()
    except FileNotFoundError:
        return []
    return [float(line.split()[1]) for line in lines if len(line.split()) == 2]


def rss_bytes(pid: int) -> int:
    """Resident set size (``VmRSS``) of a live process."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def socket_fds(pid: int) -> int:
    """How many sockets a process holds open."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd).startswith("socket:"):
                count += 1
        except OSError:
            continue
    return count


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
