"""Instructions per durable send through the PostgreSQL store API, under callgrind (issue 11).

Not a benchmark row: the deterministic figure to compare before and after a
change to ``store/postgres`` on a machine whose wall clocks are noise. A child
process drives ``store.messages.send`` with ``--in-flight`` sends in flight (as
``postgres.sends`` does) under ``valgrind --tool=callgrind``; after a warm-up
the counters are dumped, the measured sends run, and the next dump holds
exactly their cost: the store, psycopg (its C part included) and the calling
lanes. The PostgreSQL server is not counted.

    .venv/bin/python -m bench.profile_pg_sends [--sends N] [--in-flight K] [--keep DIR]

``--keep`` leaves the callgrind files for ``callgrind_annotate``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.coordinator import BODY, _lanes
from bench.profile_sends import _dumped

__all__ = ["main"]

WARMUP = 400
# How often the child looks for the parent's go-ahead: rarely, so that waiting
# adds next to nothing to either dump.
_POLL_S = 0.05


async def _child(url: str, sends: int, in_flight: int, go: Path) -> None:
    from hyperhive.store.postgres import PostgresStore, open_postgres

    async def lane(store: PostgresStore, count: int) -> None:
        for _ in range(count):
            await store.messages.send("bench", "sink", BODY)

    async def wait_for(name: str) -> None:
        while not (go / name).exists():  # noqa: ASYNC110 (a file, not an event)
            await asyncio.sleep(_POLL_S)

    store = await open_postgres(url)
    try:
        batcher = store.pg_messages.batcher
        await asyncio.gather(*(lane(store, n) for n in _lanes(WARMUP, in_flight)))
        print("warm", flush=True)
        await wait_for("sends")
        commits0 = batcher.commits
        await asyncio.gather(*(lane(store, n) for n in _lanes(sends, in_flight)))
        print(f"done {batcher.commits - commits0}", flush=True)
        await wait_for("exit")
    finally:
        await store.close()


def _dump(pid: int, label: str) -> None:
    subprocess.run(
        ["callgrind_control", f"--dump={label}", str(pid)],
        check=True,
        timeout=300,
        capture_output=True,
    )


def _line(proc: subprocess.Popen[str], want: str) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith(want):
        proc.kill()
        raise RuntimeError(f"the callgrind child said {line!r}, not {want!r} (exit {proc.wait()})")
    return line.strip()


def _measure(url: str, sends: int, in_flight: int, out: Path, go: Path) -> tuple[int, int]:
    """(instructions, commits) of ``sends`` sends in a callgrind'd child."""
    proc = subprocess.Popen(
        [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}/callgrind.%p",
            "--separate-threads=yes",
            # Each dump names its functions in full: callgrind_annotate reads one alone.
            "--compress-strings=no",
            sys.executable,
            "-m",
            "bench.profile_pg_sends",
            "--child",
            url,
            "--sends",
            str(sends),
            "--in-flight",
            str(in_flight),
            "--go",
            str(go),
        ],
        env={**os.environ, "PYTHONMALLOC": "malloc"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        _line(proc, "warm")
        _dump(proc.pid, "warm")
        (go / "sends").touch()
        commits = int(_line(proc, "done").split()[1])
        _dump(proc.pid, "sends")
        (go / "exit").touch()
        if proc.wait(timeout=600) != 0:
            raise RuntimeError(f"the callgrind child exited {proc.returncode}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return sum(_dumped(out, proc.pid, "sends").values()), commits


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_pg_sends")
    parser.add_argument("--sends", type=int, default=2000)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--keep", type=Path, help="keep the callgrind files here")
    parser.add_argument("--child", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--go", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        asyncio.run(_child(args.child, args.sends, args.in_flight, args.go))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    from tests.support.postgres import start_cluster

    cluster = start_cluster(fsync=True)
    try:
        url = cluster.url(cluster.create_database("cg"))
        with tempfile.TemporaryDirectory(prefix="hh-pgcg-") as scratch:
            out = args.keep or Path(scratch) / "cg"
            out.mkdir(parents=True, exist_ok=True)
            go = Path(scratch) / "go"
            go.mkdir()
            t0 = time.monotonic()
            ins, commits = _measure(url, args.sends, args.in_flight, out, go)
    finally:
        cluster.destroy()
    print(
        f"PostgreSQL store sends ({args.in_flight} in flight, {args.sends}): "
        f"{ins / args.sends:,.0f} instructions per send, {args.sends / max(1, commits):.2f} "
        f"sends per commit ({time.monotonic() - t0:.0f} s under callgrind)"
    )


if __name__ == "__main__":
    main()
