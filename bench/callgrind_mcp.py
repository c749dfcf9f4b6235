"""Instructions per MCP ``tools/call`` in the agent host vs the bare JSON floor (issue 13).

Not a benchmark row: a deterministic figure for comparing changes on a
loaded machine, where wall and even CPU times drift with the load. The host
(``agent_host.mcp``'s processes: coordinator, host, one real claude turn to
write the MCP config) and the bare Starlette JSON floor each run under
``valgrind --tool=callgrind`` with instrumentation off until warmed up; then
the counters are zeroed, the same raw POSTs as the headline are sent, and the
guest instructions the server executed in that window are divided by the
calls. The same count over an idle window as long is what the server does on
its own meanwhile (uvicorn's tick, the harness's long-poll, the link's
heartbeat), which grows with the window's wall time on a loaded machine: the
busy count less the idle one is the calls' own.

    .venv/bin/python -m bench.callgrind_mcp [CALLS] [--keep DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from tests.support.model_server import ModelServer, always, text

from bench._hostprocs import host, http_floor
from bench._procs import serve
from bench.agent_host import WARMUP, _json_samples, _raw_mcp_samples, _seed, alice_mcp_server
from hyperhive.agent.host import resolve_claude_bin

__all__ = ["main"]

# Python under callgrind with instrumentation off still starts ~10x slower.
START_TIMEOUT = 600.0


class Callgrind:
    """One process under callgrind, steered by ``callgrind_control`` by its pid only."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.prefix = str(directory / "vgdb")
        self.pid = 0

    def wrap(self) -> list[str]:
        return [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--vgdb-prefix={self.prefix}",
            f"--callgrind-out-file={self.directory / 'cg.out'}",
        ]

    def control(self, *args: str) -> None:
        subprocess.run(
            ["callgrind_control", f"--vgdb-prefix={self.prefix}", *args, str(self.pid)],
            check=True,
            capture_output=True,
            timeout=300,
        )

    def window(self, run: Callable[[], object]) -> tuple[int, float]:
        """(guest instructions the process executed while ``run`` ran, seconds it took)."""
        self.control("--zero")
        started = time.monotonic()
        run()
        took = time.monotonic() - started
        before = set(self.directory.glob("cg.out*"))
        self.control("--dump")
        deadline = time.monotonic() + 120
        while True:
            new = set(self.directory.glob("cg.out*")) - before
            got = [_total(p) for p in new]
            if got and got[0] is not None:
                return got[0], took
            if time.monotonic() > deadline:
                raise RuntimeError("callgrind wrote no dump")
            time.sleep(0.2)


def _total(dump: Path) -> int | None:
    for line in dump.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    return None


def _measure(
    cg: Callgrind, sampler: Callable[..., Awaitable[Any]], calls: int, *args: Any
) -> tuple[float, float]:
    """(instructions per call, idle instructions over as long) for ``sampler``'s calls."""

    def run(n: int) -> None:
        anyio.run(partial(sampler, *args, n))

    run(1)  # warm: imports, first-call caches
    cg.control("--instr=on")
    run(1)  # and once more instrumented (callgrind's own caches)
    busy, took = cg.window(lambda: run(calls))
    idle, _ = cg.window(lambda: time.sleep(took))
    return busy / (WARMUP + calls), idle / (WARMUP + calls)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.callgrind_mcp")
    parser.add_argument("calls", nargs="?", type=int, default=300)
    parser.add_argument("--keep", type=Path, help="keep the callgrind dumps in this directory")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hh-callgrind-") as scratch:
        root = args.keep or Path(scratch)
        (root / "host").mkdir(parents=True, exist_ok=True)
        (root / "floor").mkdir(parents=True, exist_ok=True)
        cg = Callgrind(root / "host")
        home = Path(scratch) / "home"
        with ModelServer(always(text("done"))) as model:
            paths = _seed(home, ["alice"], model.url, resolve_claude_bin(None))
            with (
                serve(paths, ["alice"]),
                host(paths, wrap=cg.wrap(), start_timeout=START_TIMEOUT) as (proc, info),
            ):
                cg.pid = proc.pid
                server = anyio.run(alice_mcp_server, paths, info)
                url, headers = server["url"], server["headers"]
                mcp = _measure(cg, _raw_mcp_samples, args.calls, url, headers, "get_agent_meta")
        fl = Callgrind(root / "floor")
        with http_floor("json", root / "floor", wrap=fl.wrap(), start_timeout=START_TIMEOUT) as (
            base,
            pid,
        ):
            fl.pid = pid
            floor = _measure(fl, _json_samples, args.calls, f"{base}/rpc")
    net_mcp, net_floor = mcp[0] - mcp[1], floor[0] - floor[1]
    print(f"guest instructions per POST ({WARMUP + args.calls} calls, callgrind):")
    print(f"  {'':<36}{'busy window':>14}{'idle as long':>14}{'busy - idle':>14}")
    for label, (busy, idle) in (
        ("host, raw tools/call get_agent_meta", mcp),
        ("bare Starlette JSON floor", floor),
    ):
        print(f"  {label:<36}{busy:>14,.0f}{idle:>14,.0f}{busy - idle:>14,.0f}")
    gross = f"{mcp[0] / floor[0]:.2f}×"
    print(f"  {'ratio':<36}{gross:>14}{'':>14}{net_mcp / net_floor:>13.2f}×")


if __name__ == "__main__":
    main()
