"""The coordinator against raw SQLite and a bare socket (issue 3, "Benchmarks").

Every figure comes from a real ``hivectl serve`` process on a seeded home,
driven over its real agent sockets by clients in this process; every floor
is measured in the same run on the same filesystem.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter_ns
from typing import Any

import anyio
from anyio.abc import SocketStream

from bench._procs import (
    cpu_seconds,
    echo_server,
    open_raw,
    seed_home,
    send_floor,
    serve,
    thread_cpu,
)
from bench.registry import Context, Latency, Row, Throughput, benchmark
from hyperhive.client import RpcClient, connect
from hyperhive.config import HivePaths
from hyperhive.protocol import RecvReq, SendReq, WaitReq, WaitResult
from hyperhive.store.sqlite.engine import MAX_BATCH

__all__ = ["durable_sends", "recv_latency", "wake_latency"]

# A short, realistic message body (an agent's one-line reply).
BODY = "status: build finished, 3 tests failed in tests/unit; see state/notes.md for the log"
SENDERS = 10
SINK = "sink"
RECV_AGENTS = 100

_INSERT = "INSERT INTO messages(sender, recipient, body, created_at) VALUES (?, ?, ?, ?)"
_PENDING = (
    "SELECT * FROM messages WHERE recipient = ? AND acked_at IS NULL "
    "AND delivered_at IS NULL ORDER BY id LIMIT 1"
)


def _lanes(total: int, lanes: int) -> list[int]:
    """Split ``total`` operations over ``lanes`` concurrent lanes, as evenly as possible."""
    return [total // lanes + (1 if i < total % lanes else 0) for i in range(lanes)]


# ---- durable sends/s ---------------------------------------------------------------


@benchmark("coordinator.sends")
def durable_sends(ctx: Context) -> list[Row]:
    per_client = 300 if ctx.quick else 3000
    floor_single = 1000 if ctx.quick else 5000
    floor_batched = 10_000 if ctx.quick else 50_000

    senders = [f"s{i}" for i in range(SENDERS)]
    paths = seed_home(ctx.scratch("s"), [*senders, SINK])
    with serve(paths, [*senders, SINK]) as proc:
        hive = [paths.agent_sock(name) for name in senders]
        one, cpu_one = anyio.run(_socket_send_rate, hive, per_client, 1, proc.pid)
        eight, cpu_eight = anyio.run(_socket_send_rate, hive, per_client, 8, proc.pid)
    # The same clients and work against the least Python that can do it (same run).
    lean_dir = ctx.scratch("lean")
    lean_socks = [lean_dir / f"{name}.sock" for name in senders]
    with send_floor(lean_dir / "hive.db", lean_socks) as lean_proc:
        lean_one, lean_cpu_one = anyio.run(
            _socket_send_rate, lean_socks, per_client, 1, lean_proc.pid
        )
        lean_eight, lean_cpu_eight = anyio.run(
            _socket_send_rate, lean_socks, per_client, 8, lean_proc.pid
        )

    single = _insert_rate(ctx.scratch("f") / "floor.db", floor_single, per_commit=1)
    batched = _insert_rate(ctx.scratch("f") / "floor.db", floor_batched, per_commit=MAX_BATCH)
    row_floor = "raw sqlite3, 1 INSERT+COMMIT per row, 1 thread"
    batch_floor = f"raw sqlite3, {MAX_BATCH} rows per COMMIT"
    lean_floor = "minimal Python group-commit server (same clients, schema, FULL)"
    name = f"durable sends/s, {SENDERS} clients × 1 in flight (FULL)"
    piped = f"durable sends/s, {SENDERS} clients × 8 in flight (FULL)"
    cpu_name = f"sends per coordinator CPU-second, {SENDERS} clients × 1 in flight"
    cpu_piped = f"sends per coordinator CPU-second, {SENDERS} clients × 8 in flight"
    goal = "≥ 5,000/s"
    return [
        Row(name, one, row_floor, single, goal, _cpu_note(one, cpu_one)),
        Row(name, one, batch_floor, batched, goal),
        Row(name, one, lean_floor, lean_one, goal, _lean_note(lean_one, lean_cpu_one)),
        Row(piped, eight, batch_floor, batched, goal, _cpu_note(eight, cpu_eight)),
        Row(piped, eight, lean_floor, lean_eight, goal, _lean_note(lean_eight, lean_cpu_eight)),
        Row(
            cpu_name,
            _per_cpu(one, cpu_one),
            lean_floor,
            _per_cpu(lean_one, lean_cpu_one),
            "≥ 16,667/s (≤ 60 µs per send)",
        ),
        Row(
            cpu_piped, _per_cpu(eight, cpu_eight), lean_floor, _per_cpu(lean_eight, lean_cpu_eight)
        ),
    ]


def _per_cpu(figure: Throughput, cpu: _Cpu) -> Throughput:
    """Sends per CPU-second of the serving process: its CPU cost, as a throughput."""
    return Throughput(figure.ops, max(1, round(cpu.total * 1e9)))


def _lean_note(figure: Throughput, cpu: _Cpu) -> str:
    return "the minimal server: " + _cpu_note(figure, cpu).replace("coordinator CPU", "CPU", 1)


def _cpu_note(figure: Throughput, cpu: _Cpu) -> str:
    busy = cpu.total / (figure.elapsed_ns / 1e9)

    def us(seconds: float) -> str:
        return f"{seconds / figure.ops * 1e6:.0f}"

    loop_user, loop_sys = cpu.loop
    store_user, store_sys = cpu.store
    return (
        f"coordinator CPU {us(cpu.total)} µs per send, {busy:.0%} of one core during the run "
        f"(event loop {us(loop_user)} user + {us(loop_sys)} kernel, busiest other thread "
        f"{us(store_user)} user + {us(store_sys)} kernel)"
    )


@dataclass(frozen=True)
class _Cpu:
    """The coordinator's CPU seconds over a timed part: all of it, and its two busy
    threads' (user, kernel)."""

    total: float
    loop: tuple[float, float]
    store: tuple[float, float]


def _cpu_between(
    before: dict[int, tuple[float, float]],
    after: dict[int, tuple[float, float]],
    total: float,
    pid: int,
) -> _Cpu:
    def spent(tid: int) -> tuple[float, float]:
        u0, s0 = before.get(tid, (0.0, 0.0))
        u1, s1 = after.get(tid, (0.0, 0.0))
        return u1 - u0, s1 - s0

    # The event loop is the main thread; the store's writer (SQLite) is the busiest
    # other one (worker threads are idle here; PostgreSQL has none: ~0).
    others = [spent(tid) for tid in after if tid != pid]
    return _Cpu(total, spent(pid), max(others, key=sum, default=(0.0, 0.0)))


async def _send_rate(
    paths: HivePaths, senders: Sequence[str], per_client: int, in_flight: int, pid: int
) -> tuple[Throughput, _Cpu]:
    """Sends/s over the timed part, and the coordinator's CPU during it."""
    socks = [paths.agent_sock(name) for name in senders]
    return await _socket_send_rate(socks, per_client, in_flight, pid)


async def _socket_send_rate(
    sockets: Sequence[Path], per_client: int, in_flight: int, pid: int
) -> tuple[Throughput, _Cpu]:
    """Sends/s through one client per socket, and the serving process's CPU during it."""
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(connect(path)) for path in sockets]
        async with anyio.create_task_group() as tg:
            for client in clients:
                tg.start_soon(_sends, client, 20, 1)  # warm-up: connections, caches, pages
        threads0, cpu0, t0 = thread_cpu(pid), cpu_seconds(pid), perf_counter_ns()
        async with anyio.create_task_group() as tg:
            for client in clients:
                tg.start_soon(_sends, client, per_client, in_flight)
        elapsed, cpu = perf_counter_ns() - t0, cpu_seconds(pid) - cpu0
        threads = thread_cpu(pid)
    return Throughput(per_client * len(sockets), elapsed), _cpu_between(threads0, threads, cpu, pid)


async def _sends(client: RpcClient, count: int, in_flight: int) -> None:
    async with anyio.create_task_group() as tg:
        for lane in _lanes(count, in_flight):
            tg.start_soon(_send_lane, client, lane)


async def _send_lane(client: RpcClient, count: int) -> None:
    request = SendReq(cmd="send", to=SINK, body=BODY)
    for _ in range(count):
        await client.call(request)


def _insert_rate(path: Path, rows: int, per_commit: int) -> Throughput:
    conn = open_raw(path)
    try:
        now = time.time()
        t0 = perf_counter_ns()
        done = 0
        while done < rows:
            n = min(per_commit, rows - done)
            if n == 1:  # autocommit: the INSERT is its own transaction
                conn.execute(_INSERT, ("s0", SINK, BODY, now))
            else:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(_INSERT, [("s0", SINK, BODY, now)] * n)
                conn.execute("COMMIT")
            done += n
        return Throughput(rows, perf_counter_ns() - t0)
    finally:
        conn.close()


# ---- recv with 100 agents and 100k queued rows -------------------------------------


@benchmark("coordinator.recv")
def recv_latency(ctx: Context) -> list[Row]:
    per_agent = 100 if ctx.quick else 1000
    samples = 200 if ctx.quick else 2000
    agents = [f"a{i:03d}" for i in range(RECV_AGENTS)]
    paths = seed_home(ctx.scratch("r"), agents)
    _seed_queue(paths.db, agents, per_agent)
    floor_db = ctx.scratch("f") / "floor.db"
    _copy_db(paths.db, floor_db)

    with serve(paths, agents):
        figure = anyio.run(_recv_samples, paths, agents, samples)
    floor = _raw_recv_samples(floor_db, agents, samples)
    queued = f"{len(agents) * per_agent // 1000}k"
    return [
        Row(
            f"recv max=1, {len(agents)} agents, {queued} queued",
            figure,
            "raw sqlite3 SELECT…LIMIT 1 + UPDATE + COMMIT",
            floor,
        )
    ]


def _seed_queue(db: Path, agents: Sequence[str], per_agent: int) -> None:
    """Interleaved rows (every agent's mail spread over the table), one transaction."""
    conn = open_raw(db)
    try:
        now = time.time()
        n = len(agents)
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT OR IGNORE INTO agent_state(name) VALUES (?)", [(a,) for a in agents]
        )
        conn.executemany(
            _INSERT,
            ((agents[(i + 1) % n], agents[i % n], BODY, now) for i in range(n * per_agent)),
        )
        conn.execute("COMMIT")
    finally:
        conn.close()


def _copy_db(src: Path, dst: Path) -> None:
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    try:
        a.backup(b)
    finally:
        a.close()
        b.close()


async def _recv_samples(paths: HivePaths, agents: Sequence[str], samples: int) -> Latency:
    request = RecvReq(cmd="recv", max=1)
    out: list[int] = []
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(connect(paths.agent_sock(a))) for a in agents]
        for client in clients:  # warm-up: one recv each
            await client.call(request)
        for i in range(samples):
            client = clients[i % len(clients)]
            t0 = perf_counter_ns()
            rows = await client.call(request)
            out.append(perf_counter_ns() - t0)
            if len(rows) != 1:
                raise RuntimeError(f"recv returned {rows!r}; the queue was seeded too short")
    return Latency.of(out)


def _raw_recv_samples(db: Path, agents: Sequence[str], samples: int) -> Latency:
    conn = open_raw(db)
    out: list[int] = []
    try:
        for i in range(len(agents) + samples):  # the first round is the warm-up
            agent = agents[i % len(agents)]
            t0 = perf_counter_ns()
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(_PENDING, (agent,)).fetchone()
            conn.execute("UPDATE messages SET delivered_at = ? WHERE id = ?", (time.time(), row[0]))
            conn.execute("COMMIT")
            if i >= len(agents):
                out.append(perf_counter_ns() - t0)
    finally:
        conn.close()
    return Latency.of(out)


# ---- send → wait wake-up -------------------------------------------------------------


@benchmark("coordinator.wake")
def wake_latency(ctx: Context) -> list[Row]:
    samples = 200 if ctx.quick else 2000
    # Both the figure and the floors idle this long before each sample, so each
    # measures a wake-up from idle (and the long-poll is parked, not mid-poll).
    idle_s = 0.003
    paths = seed_home(ctx.scratch("w"), ["a", "b"])
    bare, durable = ctx.scratch("e") / "echo.sock", ctx.scratch("d") / "echo.sock"
    # The durable floor: the same ping-pong with one INSERT + COMMIT (one fsync) before
    # each echo. Its samples alternate with the figure's: this disk's fsync latency moves
    # with the machine's other I/O, and both must meet the same disk.
    with (
        serve(paths, ["a", "b"]),
        echo_server(bare),
        echo_server(durable, ctx.scratch("d") / "floor.db"),
    ):
        figure, floor, durable_floor = anyio.run(
            _wake_rounds, paths, bare, durable, samples, idle_s
        )
    name = "send → wait wake-up (a long-polls, b sends to a)"
    return [
        Row(name, figure, "bare anyio unix-socket ping-pong", floor, "p50 ≤ 3×"),
        Row(name, figure, "ping-pong + raw sqlite3 INSERT+COMMIT (1 fsync)", durable_floor),
    ]


async def _wait_once(client: RpcClient, box: list[Any]) -> None:
    result = await client.call(WaitReq(cmd="wait", timeout=30))
    box.extend((perf_counter_ns(), result))


async def _wake_rounds(
    paths: HivePaths, bare: Path, durable: Path, samples: int, idle_s: float
) -> tuple[Latency, Latency, Latency]:
    """The figure and both floors, one sample of each per round."""
    request = SendReq(cmd="send", to="a", body=BODY)
    frame = _echo_frame()
    out: tuple[list[int], list[int], list[int]] = ([], [], [])
    async with (
        connect(paths.agent_sock("a")) as waiter,
        connect(paths.agent_sock("b")) as sender,
        await anyio.connect_unix(bare) as echo,
        await anyio.connect_unix(durable) as durable_echo,
    ):
        for i in range(samples + 20):  # the first 20 are the warm-up
            wake = await _wake_once(waiter, sender, request, idle_s)
            pong = await _pingpong_once(echo, frame, idle_s)
            durable_pong = await _pingpong_once(durable_echo, frame, idle_s)
            if i >= 20:
                for series, ns in zip(out, (wake, pong, durable_pong), strict=True):
                    series.append(ns)
    return Latency.of(out[0]), Latency.of(out[1]), Latency.of(out[2])


async def _wake_once(waiter: RpcClient, sender: RpcClient, request: SendReq, idle_s: float) -> int:
    box: list[Any] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_wait_once, waiter, box)
        await anyio.sleep(idle_s)
        t0 = perf_counter_ns()
        await sender.call(request)
    woke, result = box
    assert isinstance(woke, int)
    if not isinstance(result, WaitResult) or not result.messages:
        raise RuntimeError(f"wait returned without the message: {result!r}")
    return woke - t0


async def _pingpong_once(stream: SocketStream, frame: bytes, idle_s: float) -> int:
    await anyio.sleep(idle_s)
    t0 = perf_counter_ns()
    await stream.send(frame)
    got = b""
    while not got.endswith(b"\n"):
        got += await stream.receive(65536)
    return perf_counter_ns() - t0


async def _pingpong_samples(path: Path, samples: int, idle_s: float) -> Latency:
    frame = _echo_frame()
    async with await anyio.connect_unix(path) as stream:
        out = [await _pingpong_once(stream, frame, idle_s) for _ in range(samples + 20)]
    return Latency.of(out[20:])  # the first 20 are the warm-up


def _echo_frame() -> bytes:
    """A frame the size of a send request, so the floor moves the same bytes."""
    return SendReq(cmd="send", to="a", body=BODY, id=1).model_dump_json().encode() + b"\n"
