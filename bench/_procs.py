"""Processes a benchmark runs against: ``hivectl serve`` on a seeded home, an echo server.

Each runs as its own process so the measuring client never shares an event
loop (or a GIL) with the server it measures.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from hyperhive.config import AgentConfig, HivePaths, dump_agent_config
from hyperhive.store.sqlite.engine import migrate

__all__ = [
    "cpu_seconds",
    "echo_server",
    "open_raw",
    "seed_home",
    "send_floor",
    "serve",
    "thread_cpu",
    "wait_up",
]

START_TIMEOUT = 30.0


def seed_home(home: Path, agents: Sequence[str]) -> HivePaths:
    """Applied default configs for ``agents`` (all roots), before a coordinator starts."""
    paths = HivePaths(home)
    (paths.meta / "agents").mkdir(parents=True, exist_ok=True)
    text = dump_agent_config(AgentConfig())
    for name in agents:
        paths.applied_config(name).write_text(text)
    # Unsandboxed: these benchmarks measure the coordinator, and a bwrap hive would
    # create a system user per agent on the machine running them.
    if not (home / "hive.toml").exists():
        (home / "hive.toml").write_text('runtime = "unsandboxed"\n')
    return paths


def open_raw(path: Path) -> sqlite3.Connection:
    """A bare connection set up like the coordinator's (WAL, synchronous=FULL), migrated."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    migrate(conn, path)
    return conn


@contextmanager
def serve(paths: HivePaths, agents: Sequence[str]) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m hyperhive serve`` for the block, once every agent socket listens."""
    log_path = paths.home / "serve.log"
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hyperhive", "serve"],
            env={**os.environ, "HIVE_HOME": str(paths.home)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        sockets = [paths.host_sock, *(paths.agent_sock(a) for a in agents)]
        _wait_listening(proc, sockets, log_path)
        wait_up(proc, log_path)
        yield proc
    finally:
        _stop(proc)


@contextmanager
def echo_server(path: Path, db: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """The bare anyio unix-socket echo server of :mod:`bench._echo`, for the block;
    with ``db``, each echo follows one durable INSERT + COMMIT into it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench._echo", str(path), *([str(db)] if db else [])],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    try:
        _wait_listening(proc, [path], None)
        yield proc
    finally:
        _stop(proc)


@contextmanager
def send_floor(db: Path, sockets: Sequence[Path]) -> Iterator[subprocess.Popen[bytes]]:
    """The minimal group-commit send server of :mod:`bench._send_floor`, for the block."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench._send_floor", str(db), *map(str, sockets)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    try:
        _wait_listening(proc, sockets, None)
        yield proc
    finally:
        _stop(proc)


def wait_up(proc: subprocess.Popen[bytes], log: Path, timeout: float = START_TIMEOUT) -> None:
    """Until the coordinator logs that it is up.

    Its sockets answer before it is done starting: the dashboard's imports
    still run on a worker thread then, and a figure taken meanwhile would
    count seconds of import CPU as the coordinator's per-request cost.
    """
    deadline = time.monotonic() + timeout
    while b"coordinator up" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            state = f"exited {proc.returncode}" if proc.returncode is not None else "timed out"
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{proc.args!r} {state} before it logged 'coordinator up'\n{tail}")
        time.sleep(0.02)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[int, tuple[float, float]]:
    """(user, system) CPU seconds of each live thread of ``pid`` so far, by thread id
    (the main thread's is ``pid``)."""
    tick = os.sysconf("SC_CLK_TCK")
    found: dict[int, tuple[float, float]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        found[int(task.name)] = (int(fields[11]) / tick, int(fields[12]) / tick)
    return found


def _wait_listening(
    proc: subprocess.Popen[bytes], sockets: Sequence[Path], log: Path | None
) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    pending = list(sockets)
    while pending:
        if _listening(pending[0]):
            pending.pop(0)
            continue
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:] if log is not None else ""
            state = f"exited {proc.returncode}" if proc.returncode is not None else "timed out"
            raise RuntimeError(f"{proc.args!r} {state} before {pending[0]} listened\n{tail}")
        time.sleep(0.01)


def _listening(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as sock:
        try:
            sock.connect(str(path))
        except OSError:
            return False
        return True


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
