"""Coordinator instructions per durable send and per send → wake, under callgrind (issue 11).

Not a benchmark row: the deterministic figure to compare before and after a
change on a machine whose wall clocks are noise. ``hivectl serve`` runs under
``valgrind --tool=callgrind``; after a warm-up the counters are dumped, the
measured part runs, and the next dump holds exactly its cost. Instruction
counts repeat to a fraction of a percent under any load.

    .venv/bin/python -m bench.profile_sends [--sends N] [--in-flight K] [--wakes N] [--keep DIR]

``--keep`` leaves the callgrind files for ``callgrind_annotate``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio

import bench._procs as procs
from bench._procs import _wait_listening, seed_home, wait_up
from bench.coordinator import BODY, SENDERS, SINK, _lanes
from hyperhive.client import RpcClient, connect
from hyperhive.config import HivePaths
from hyperhive.protocol import SendReq, WaitReq

__all__ = ["main"]

WARMUP = 20
_TOTALS = re.compile(rb"^(?:summary|totals):\s+(\d+)", re.MULTILINE)


@contextmanager
def _callgrind_serve(paths: HivePaths, agents: Sequence[str], out: Path) -> Any:
    log_path = paths.home / "serve.log"
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}/callgrind.%p",
                "--separate-threads=yes",
                sys.executable,
                "-m",
                "hyperhive",
                "serve",
            ],
            env={**os.environ, "HIVE_HOME": str(paths.home), "PYTHONMALLOC": "malloc"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        old, procs.START_TIMEOUT = procs.START_TIMEOUT, 900.0  # valgrind: ~50× slower
        try:
            _wait_listening(proc, [paths.agent_sock(a) for a in agents], log_path)
        finally:
            procs.START_TIMEOUT = old
        wait_up(proc, log_path, timeout=900.0)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _dump(pid: int, label: str) -> None:
    subprocess.run(["callgrind_control", f"--dump={label}", str(pid)], check=True, timeout=300)


def _dumped(out: Path, pid: int, label: str) -> dict[str, int]:
    """Instructions per thread in the dump named ``label``."""
    found: dict[str, int] = {}
    for path in sorted(out.glob(f"callgrind.{pid}.*")):
        data = path.read_bytes()
        if f"desc: Trigger: dump {label}\n".encode() in data:
            if (m := _TOTALS.search(data)) is not None:
                found[path.name.rsplit("-", 1)[-1]] = int(m.group(1))
    if not found:
        raise RuntimeError(f"no callgrind dump {label!r} in {out}")
    return found


async def _send_lane(client: RpcClient, count: int) -> None:
    request = SendReq(cmd="send", to=SINK, body=BODY)
    for _ in range(count):
        await client.call(request)


async def _sends(
    paths: HivePaths, senders: Sequence[str], per_client: int, in_flight: int, pid: int
) -> None:
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(connect(paths.agent_sock(s))) for s in senders]
        async with anyio.create_task_group() as tg:
            for client in clients:
                tg.start_soon(_send_lane, client, WARMUP)
        await anyio.to_thread.run_sync(_dump, pid, "warm")
        async with anyio.create_task_group() as tg:
            for client in clients:
                for lane in _lanes(per_client, in_flight):
                    tg.start_soon(_send_lane, client, lane)
        await anyio.to_thread.run_sync(_dump, pid, "sends")


async def _wakes(paths: HivePaths, count: int, pid: int) -> None:
    request = SendReq(cmd="send", to="a", body=BODY)
    async with connect(paths.agent_sock("a")) as waiter, connect(paths.agent_sock("b")) as sender:

        async def once() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(waiter.call, WaitReq(cmd="wait", timeout=30))
                await anyio.sleep(0.05)  # the long-poll is parked before the send
                await sender.call(request)

        for _ in range(WARMUP):
            await once()
        await anyio.to_thread.run_sync(_dump, pid, "warm")
        for _ in range(count):
            await once()
        await anyio.to_thread.run_sync(_dump, pid, "wakes")


def _threads(ins: dict[str, int], per: int) -> str:
    return ", ".join(f"thread {t}: {n / per:,.0f}" for t, n in sorted(ins.items()))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_sends")
    parser.add_argument("--sends", type=int, default=300, help="sends per client")
    parser.add_argument("--in-flight", type=int, default=1)
    parser.add_argument("--wakes", type=int, default=0, help="also measure N send → wake rounds")
    parser.add_argument("--keep", type=Path, help="keep the callgrind files here")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="hh-cg-") as scratch:
        out = args.keep or Path(scratch) / "cg"
        out.mkdir(parents=True, exist_ok=True)
        senders = [f"s{i}" for i in range(SENDERS)]
        if args.sends:
            paths = seed_home(Path(scratch) / "s", [*senders, SINK])
            with _callgrind_serve(paths, [*senders, SINK], out) as proc:
                anyio.run(_sends, paths, senders, args.sends, args.in_flight, proc.pid)
                total = args.sends * len(senders)
                ins = _dumped(out, proc.pid, "sends")
            print(
                f"sends ({len(senders)} clients × {args.in_flight} in flight, {total}): "
                f"{sum(ins.values()) / total:,.0f} instructions per send ({_threads(ins, total)})"
            )
        if args.wakes:
            paths = seed_home(Path(scratch) / "w", ["a", "b"])
            with _callgrind_serve(paths, ["a", "b"], out) as proc:
                anyio.run(_wakes, paths, args.wakes, proc.pid)
                ins = _dumped(out, proc.pid, "wakes")
            print(
                f"send → wake ({args.wakes}): {sum(ins.values()) / args.wakes:,.0f} "
                f"instructions per round ({_threads(ins, args.wakes)})"
            )


if __name__ == "__main__":
    main()
