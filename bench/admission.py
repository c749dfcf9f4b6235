"""A herd of wakes against the host's claude slots (issue 12, "A herd of wakes").

Real ``hivectl serve`` and ``hivectl host`` processes on a seeded home; claude
is the real CLI against the tests' scripted model server (one text reply per
turn), started through the exec-stamping wrapper, which records each claude's
pid. A sampler reads those pids' ``VmRSS`` from ``/proc`` while the herd runs,
for the peak memory and the peak number of claudes alive at once.

The floor is the same run's turn alone: one agent woken on an idle host,
times N — what the herd would take if its turns ran one after another.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
from tests.support.model_server import ModelServer, always, text

from bench._hostprocs import claude_wrapper, host
from bench._procs import serve
from bench.agent_host import _nodelay, _operator_headers, _seed, _until_active
from bench.registry import Context, Latency, Row, benchmark
from hyperhive.agent.host import resolve_claude_bin
from hyperhive.client import connect
from hyperhive.config import HivePaths
from hyperhive.protocol import OpSendReq

__all__ = ["herd"]

MB = 1 << 20


@dataclass(frozen=True)
class _Run:
    elapsed_ns: int
    peak_rss: int  # bytes, all claudes alive at the same sample
    peak_alive: int


class _Sampler:
    """Polls the wrapper's pid record: live claudes and their summed RSS, peaks kept."""

    def __init__(self, record: Path) -> None:
        self.record = record
        self.peak_rss = 0
        self.peak_alive = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(0.02):
            try:
                pids = {line.split()[0] for line in self.record.read_text().splitlines()}
            except (FileNotFoundError, IndexError):
                continue
            total = alive = 0
            for pid in pids:
                rss = _rss(pid)
                if rss:
                    total += rss
                    alive += 1
            self.peak_rss = max(self.peak_rss, total)
            self.peak_alive = max(self.peak_alive, alive)


def _rss(pid: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError, ValueError):
        pass
    return 0  # exited (or a zombie, which holds no memory)


@benchmark("admission.herd")
def herd(ctx: Context) -> list[Row]:
    n = 6 if ctx.quick else 12
    slots = 2 if ctx.quick else 4
    alone = 2 if ctx.quick else 3
    agents = [f"h{i:02d}" for i in range(n)]
    with ModelServer(always(text("done"))) as model:
        _nodelay(model)
        solo = [_herd(ctx, model, agents[:1], 1).elapsed_ns for _ in range(alone)]
        limited = _herd(ctx, model, agents, slots)
        unlimited = _herd(ctx, model, agents, n)
    floor = Latency.of([n * s for s in solo])
    one = Latency.of(solo)

    def memory(run: _Run) -> str:
        return f"peak {run.peak_alive} claudes alive, {run.peak_rss / MB:.0f} MB summed RSS"

    return [
        Row(
            f"herd of {n} wakes, claude_slots = {slots}: first wake → last turn end",
            Latency.of([limited.elapsed_ns]),
            f"{n} × one turn alone (1 agent, idle host)",
            floor,
            "≤ 1×",
            f"{memory(limited)}; one turn alone p50 {one.p50:.0f} ms",
        ),
        Row(
            f"herd of {n} wakes, claude_slots = {n} (no queueing)",
            Latency.of([unlimited.elapsed_ns]),
            f"{n} × one turn alone (1 agent, idle host)",
            floor,
            "",
            f"{memory(unlimited)}: the memory the slots saved is the difference "
            f"({(unlimited.peak_rss - limited.peak_rss) / MB:.0f} MB here)",
        ),
    ]


def _herd(ctx: Context, model: ModelServer, agents: Sequence[str], slots: int) -> _Run:
    home = ctx.scratch("h")
    record = home / "execs"
    wrapper = claude_wrapper(home, resolve_claude_bin(None), record)
    paths = _seed(home, agents, model.url, wrapper)
    with (home / "hive.toml").open("a") as toml:
        toml.write(f"claude_slots = {slots}\n")
    with serve(paths, agents), host(paths) as (_, info), _Sampler(record) as sampler:
        elapsed = anyio.run(_wake_all, paths, info, agents)
    return _Run(elapsed, sampler.peak_rss, sampler.peak_alive)


async def _wake_all(paths: HivePaths, info: Mapping[str, Any], agents: Sequence[str]) -> int:
    """Wake every agent at once; nanoseconds until the last one's turn has ended."""
    headers = _operator_headers(info)
    async with httpx.AsyncClient(timeout=30) as http, connect(paths.host_sock) as op:
        for agent in agents:
            await _until_active(http, info, agent)
        await anyio.sleep(0.2)  # let every harness park in its long-poll
        t0 = time.perf_counter_ns()
        for agent in agents:
            await op.call(OpSendReq(cmd="send", to=agent, body="wake up"))
        pending = set(agents)
        with anyio.fail_after(600):
            while pending:
                for agent in sorted(pending):
                    url = f"{info['url']}/api/agents/{agent}/state"
                    state = (await http.get(url, headers=headers)).json()
                    if state["last_turn"] and state["turn_state"] == "idle":
                        if state["last_turn"]["outcome"] != "ok":
                            raise RuntimeError(f"{agent}'s turn ended {state['last_turn']}")
                        pending.discard(agent)
                await anyio.sleep(0.05)
        return time.perf_counter_ns() - t0
