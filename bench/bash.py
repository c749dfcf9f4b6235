"""Background bash tasks (issue 5, "Benchmark"): the task engine beside a bare subprocess.

Both sides run in this process on the same event loop and filesystem: the
figure is :class:`~hyperhive.bash.tasks.TaskManager` (validation, the task
table written atomically per state change, its own process group, output
files, todos to a sink that drops them), the floor is ``anyio.open_process``
of the same ``bash -c`` with nothing around it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from time import perf_counter_ns

import anyio

from bench.registry import Context, Latency, Row, Throughput, benchmark
from hyperhive.agent.sandbox import AgentSandbox
from hyperhive.bash.tasks import TaskManager, TaskStarted

__all__ = ["output_throughput", "run_status_round_trip"]

MIB = 1 << 20


class _NoTodos:
    """A sink that drops todos: the coordinator round trip is not what is measured here."""

    async def upsert(self, key: str, body: str, *, wake: bool = True) -> None:
        return None

    async def clear(self, key: str) -> None:
        return None


def _sandbox(root: Path) -> AgentSandbox:
    dirs = {name: root / name for name in ("work", "home", "state")}
    for path in dirs.values():
        path.mkdir()
    return AgentSandbox("bench", dirs["work"], dirs["home"], dirs["state"], {"LANG": "C"})


# ---- run → status round trip ---------------------------------------------------------


@benchmark("bash.round_trip")
def run_status_round_trip(ctx: Context) -> list[Row]:
    count = 50 if ctx.quick else 500
    root = ctx.scratch("rt")
    figure = anyio.run(_round_trips, _sandbox(root), count)
    floor = anyio.run(_bare_spawns, root / "work", count)
    return [
        Row(
            "run(`true`, wait 0) → status(wait) until done",
            figure,
            "anyio.open_process(bash -c true) + wait",
            floor,
            note="the gap is the task table (atomic write per state change) and the "
            "extra scheduling hop; both sides fork+exec bash",
        )
    ]


async def _round_trips(sandbox: AgentSandbox, count: int) -> Latency:
    samples: list[int] = []
    async with TaskManager(sandbox, sandbox.state, _NoTodos(), history=count + 10) as tasks:
        for _ in range(count):
            t0 = perf_counter_ns()
            started = await tasks.run("true", wait_seconds=0)
            assert isinstance(started, TaskStarted)
            report = await tasks.status(started.id, wait_seconds=30)
            samples.append(perf_counter_ns() - t0)
            assert report.status == "done", report
    return Latency.of(samples)


async def _bare_spawns(cwd: Path, count: int) -> Latency:
    samples: list[int] = []
    for _ in range(count):
        t0 = perf_counter_ns()
        process = await anyio.open_process(
            ["bash", "-c", "true"],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        await process.wait()
        samples.append(perf_counter_ns() - t0)
    return Latency.of(samples)


# ---- output throughput to disk -------------------------------------------------------


@benchmark("bash.output")
def output_throughput(ctx: Context) -> list[Row]:
    mib = 64 if ctx.quick else 1024
    cmd = f"head -c {mib * MIB} /dev/zero"
    root = ctx.scratch("out")
    figure = anyio.run(_task_output, _sandbox(root), cmd, mib)
    floor = anyio.run(_bare_output, root / "floor.out", cmd, mib)
    return [
        Row(
            f"task output to disk, {mib} MiB (MiB/s)",
            figure,
            "bare subprocess, stdout = the file",
            floor,
            note="output goes from the child straight to its file: no pipe, no copy "
            "in the host, so host memory stays flat however much a task prints",
        )
    ]


async def _task_output(sandbox: AgentSandbox, cmd: str, mib: int) -> Throughput:
    async with TaskManager(sandbox, sandbox.state, _NoTodos()) as tasks:
        t0 = perf_counter_ns()
        report = await tasks.run(cmd, wait_seconds=0)
        final = await tasks.status(report.id, wait_seconds=30)
        while not final.terminal:
            final = await tasks.status(report.id, wait_seconds=30)
        elapsed = perf_counter_ns() - t0
        assert final.status == "done" and final.stdout_path.stat().st_size == mib * MIB
    return Throughput(mib, elapsed)


async def _bare_output(path: Path, cmd: str, mib: int) -> Throughput:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t0 = perf_counter_ns()
        process = await anyio.open_process(
            ["bash", "-c", cmd], stdin=subprocess.DEVNULL, stdout=fd, stderr=subprocess.DEVNULL
        )
        await process.wait()
        elapsed = perf_counter_ns() - t0
    finally:
        os.close(fd)
    assert path.stat().st_size == mib * MIB
    return Throughput(mib, elapsed)
