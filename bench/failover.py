"""Coordinator failover on PostgreSQL (issue 11: a standby takes over within 10 s).

``kill -9`` of the active ``hivectl serve`` until the standby (a second
``serve`` on the same home) has every socket listening, beside the floor it
is judged against: a cold ``hivectl serve`` of the same hive, from exec to
listening. The difference is the lease's expiry (5 s after its last renewal,
renewed every ttl/3) and the standby's poll (every ttl/5).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from time import perf_counter_ns

from tests.support.postgres import start_cluster

from bench._procs import _stop, _wait_listening, seed_home
from bench.registry import Context, Latency, Row, benchmark
from hyperhive.config import HivePaths

__all__ = ["pg_failover"]

AGENTS = [f"a{i:02d}" for i in range(10)]
STANDBY_WITHIN_S = 60.0


@benchmark("postgres.failover")
def pg_failover(ctx: Context) -> list[Row]:
    rounds = 2 if ctx.quick else 5
    cluster = start_cluster(fsync=True)
    try:
        home = ctx.scratch("fo")
        (home / "store.url").write_text(cluster.url(cluster.create_database("bench")) + "\n")
        (home / "store.url").chmod(0o600)
        (home / "hive.toml").write_text(
            'runtime = "unsandboxed"\nstore_url_file = "store.url"\ndashboard_port = 0\n'
        )
        paths = seed_home(home, AGENTS)
        sockets = [paths.host_sock, paths.hosts_sock, *(paths.agent_sock(a) for a in AGENTS)]
        cold: list[int] = []
        for i in range(rounds):
            t0 = perf_counter_ns()
            proc = _start(paths, f"cold-{i}")
            try:
                _wait_listening(proc, sockets, home / f"cold-{i}.log")
                cold.append(perf_counter_ns() - t0)
            finally:
                _stop(proc)  # SIGTERM releases the lease: the next start takes it at once
        takeovers: list[int] = []
        active = _start(paths, "active-0")
        try:
            _wait_listening(active, sockets, home / "active-0.log")
            for i in range(rounds):
                standby = _start(paths, f"active-{i + 1}")
                _standing_by(standby, home / f"active-{i + 1}.log")
                active.send_signal(signal.SIGKILL)
                active.wait()
                t0 = perf_counter_ns()
                active = standby
                _wait_listening(active, sockets, home / f"active-{i + 1}.log")
                takeovers.append(perf_counter_ns() - t0)
        finally:
            _stop(active)
    finally:
        cluster.destroy()
    return [
        Row(
            "failover: kill -9 of the active coordinator → standby serving (PostgreSQL)",
            Latency.of(takeovers),
            "cold start of hivectl serve on the same hive (exec → listening)",
            Latency.of(cold),
            "≤ 10 s",
            f"{rounds} takeovers, {len(AGENTS)} agents; lease ttl 5 s (renewed every 1.7 s), "
            "standby polls every 1 s and has its modules loaded",
        )
    ]


def _start(paths: HivePaths, name: str) -> subprocess.Popen[bytes]:
    with (paths.home / f"{name}.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "hyperhive", "serve"],
            env={**os.environ, "HIVE_HOME": str(paths.home)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )


def _standing_by(proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STANDBY_WITHIN_S
    while b"standing by" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the standby did not stand by:\n{log.read_text()[-2000:]}")
        time.sleep(0.05)
