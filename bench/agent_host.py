"""The agent host beside same-run floors (issue 4, "Benchmarks").

Every figure comes from real ``hivectl serve`` and ``hivectl host`` processes
on a seeded home, observed from outside as an operator could: the operator
socket, the host's per-agent API (its operator token is in
``run/agent-host.json``), the MCP config a turn writes, ``/proc``. claude is
the real CLI against the tests' scripted model server; the moment it is
exec'd is stamped by a wrapper named as ``claude_bin`` in ``hive.toml``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter_ns
from typing import Any

import anyio
import httpx
from anyio.streams.memory import MemoryObjectSendStream
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
)
from mcp_types.version import LATEST_MODERN_VERSION
from tests.support.model_server import ModelServer, always, text

from bench._hostprocs import claude_wrapper, exec_times, host, http_floor, rss_bytes, socket_fds
from bench._procs import cpu_seconds, serve
from bench.registry import Context, Latency, Row, Throughput, benchmark
from hyperhive.agent.host import resolve_claude_bin
from hyperhive.client import RpcClient, call_once, connect
from hyperhive.config import AgentConfig, HivePaths, dump_agent_config
from hyperhive.protocol import GetAgentMetaReq, OpAgentsReq, OpSendReq

__all__ = ["alice_mcp_server", "exec_latency", "mcp_roundtrip", "mcp_samples", "sleeping_agents"]

RAW = "MCP tools/call get_agent_meta via the host's surface, raw POST"
MODERN = LATEST_MODERN_VERSION
BODY = "status: build finished, 3 tests failed in tests/unit; see state/notes.md for the log"
WARMUP = 50


def _seed(
    home: Path, agents: Sequence[str], model_url: str, claude: str | Path, hive_toml: str = ""
) -> HivePaths:
    """Applied configs whose claude reaches the scripted model, and ``claude_bin``."""
    paths = HivePaths(home)
    (paths.meta / "agents").mkdir(parents=True, exist_ok=True)
    config = AgentConfig(
        env={
            "ANTHROPIC_BASE_URL": model_url,
            "ANTHROPIC_API_KEY": "bench-key",
            "CLAUDE_CODE_MAX_RETRIES": "0",
        }
    )
    rendered = dump_agent_config(config)
    for name in agents:
        paths.applied_config(name).write_text(rendered)
    # Unsandboxed: this measures the hive's own overhead (lifecycle.bwrap measures bwrap's).
    (home / "hive.toml").write_text(
        f'claude_bin = {json.dumps(str(claude))}\nruntime = "unsandboxed"\n{hive_toml}'
    )
    return paths


def _nodelay(model: ModelServer) -> None:
    """TCP_NODELAY on the scripted server's listener (inherited by its connections).

    It binds a proto-0 socket, so asyncio leaves Nagle on and every streamed
    reply would stall ~40 ms on claude's delayed ACK, inflating the turn.
    """
    model._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _operator_headers(info: Mapping[str, Any]) -> dict[str, str]:
    return {"authorization": f"Bearer {info['token']}"}


async def _until_active(http: httpx.AsyncClient, info: Mapping[str, Any], agent: str) -> None:
    """The host serves ``agent``'s per-agent API once it activated it."""
    url = f"{info['url']}/api/agents/{agent}/state"
    with anyio.fail_after(60):
        while True:
            response = await http.get(url, headers=_operator_headers(info))
            if response.status_code == 200:
                return
            await anyio.sleep(0.02)


# ---- message accepted → claude exec'd ----------------------------------------------


# A model's real turn: seconds to minutes. The hive's share is stated against the
# scripted ~1 s turn (the worst case) and against this, as a turn to expect.
REALISTIC_TURN_MS = 20_000.0
# Measured with the harness's settle window as shipped (0) and with 0.2 s, its old value.
SETTLES = (0.0, 0.2)


@benchmark("agent_host.exec")
def exec_latency(ctx: Context) -> list[Row]:
    samples = 5 if ctx.quick else 40
    wrapper_ms = _bash_start_ms()
    return [_exec_row(ctx, samples, settle, wrapper_ms) for settle in SETTLES]


def _exec_row(ctx: Context, samples: int, settle: float, wrapper_ms: float) -> Row:
    home = ctx.scratch("x")
    record = home / "execs"
    wrapper = claude_wrapper(home, resolve_claude_bin(None), record)
    api_times: list[float] = []

    def script(body: dict[str, Any]) -> Any:
        api_times.append(time.time())
        return text("done")

    with ModelServer(script) as model:
        _nodelay(model)
        paths = _seed(home, ["alice"], model.url, wrapper, f"settle_seconds = {settle}\n")
        with serve(paths, ["alice"]), host(paths) as (_, info):
            turns = anyio.run(_turns, paths, info, samples)
    hive, cold, share, whole = [], [], [], []
    execs = exec_times(record)[1:]  # the first turn is the warm-up
    for (accepted, ended), exec_at in zip(turns, execs, strict=True):
        first_api = min(t for t in api_times if t > exec_at)
        hive.append(round((exec_at - accepted) * 1e9))
        cold.append(round((first_api - exec_at) * 1e9))
        whole.append(round((ended - accepted) * 1e9))
        share.append((exec_at - accepted) / (ended - accepted))
    share.sort()
    turn, figure = Latency.of(whole), Latency.of(hive)
    realistic = figure.p50 / (REALISTIC_TURN_MS + figure.p50)
    return Row(
        f"message accepted → claude exec'd (1 agent, idle, settle {settle:g} s)",
        figure,
        "claude cold start: exec → first /v1/messages",
        Latency.of(cold),
        "hive ≤ 5% of the turn",
        f"hive's share of a scripted turn (accepted → claude exited: p50 {turn.p50:.0f} ms, "
        f"a one-text-block reply): p50 {share[len(share) // 2]:.1%}, max {share[-1]:.1%}; "
        f"of a {REALISTIC_TURN_MS / 1000:.0f} s model turn: {realistic:.1%} at p50; the "
        f"figure includes the timestamping bash wrapper's own start (~{wrapper_ms:.1f} ms "
        "when spawned from Python)",
    )


async def _turns(
    paths: HivePaths, info: Mapping[str, Any], samples: int
) -> list[tuple[float, ...]]:
    """(accepted, turn ended) wall-clock times for each sample after one warm-up turn."""
    url = f"{info['url']}/api/agents/alice/events"
    out: list[tuple[float, ...]] = []
    send, events = anyio.create_memory_object_stream[dict[str, Any]](1000)
    async with (
        httpx.AsyncClient(timeout=None) as http,
        connect(paths.host_sock) as op,
        anyio.create_task_group() as tg,
    ):
        await _until_active(http, info, "alice")
        tg.start_soon(_pump_events, http, url, _operator_headers(info), send)
        for i in range(samples + 1):
            await anyio.sleep(0.05)  # let the harness park in its long-poll
            before = time.time()
            await op.call(OpSendReq(cmd="send", to="alice", body=BODY))
            accepted = time.time()
            end: dict[str, Any] | None = None
            with anyio.fail_after(120):
                async for event in events:
                    if event["at"] < before:
                        continue
                    if event["kind"] == "turn_end":
                        end = event
                    elif end is not None and event.get("turn_state") == "idle":
                        break  # the turn was reported; the harness waits again
            assert end is not None
            if end["outcome"] != "ok":
                raise RuntimeError(f"turn {i} ended {end['outcome']}; see the agent log")
            if i:
                out.append((accepted, float(end["at"])))
        tg.cancel_scope.cancel()
    return out


async def _pump_events(
    http: httpx.AsyncClient,
    url: str,
    headers: Mapping[str, str],
    send: MemoryObjectSendStream[dict[str, Any]],
) -> None:
    async with send, http.stream("GET", url, headers=headers) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                await send.send(json.loads(line[6:]))


def _bash_start_ms(samples: int = 20) -> float:
    """p50 of spawning bash from Python until it reads ``$EPOCHREALTIME``."""
    out = []
    for _ in range(samples):
        before = time.time()
        got = subprocess.run(
            ["bash", "-c", 'printf "%s" "$EPOCHREALTIME"'], capture_output=True, text=True
        )
        out.append((float(got.stdout) - before) * 1000)
    return sorted(out)[len(out) // 2]


# ---- MCP tool-call round trip ---------------------------------------------------------


@benchmark("agent_host.mcp")
def mcp_roundtrip(ctx: Context) -> list[Row]:
    calls = 200 if ctx.quick else 2000
    home = ctx.scratch("m")
    with ModelServer(always(text("done"))) as model:
        paths = _seed(home, ["alice"], model.url, resolve_claude_bin(None))
        with serve(paths, ["alice"]), host(paths) as (proc, info):
            surface = anyio.run(_surface_samples, paths, info, proc.pid, calls)
    scratch = ctx.scratch("f")
    with http_floor("mcp", scratch) as (base, pid):
        bare_mcp = anyio.run(mcp_samples, f"{base}/mcp", {}, "ping", calls)
        bare_mcp_raw, mcp_cpu = _cpu_timed(pid, _raw_mcp_samples, f"{base}/mcp", {}, "ping", calls)
    with http_floor("json", scratch) as (base, pid):
        bare_json, json_cpu = _cpu_timed(pid, _json_samples, f"{base}/rpc", calls)
    sdk = "MCP tools/call get_agent_meta via the host's surface, mcp SDK client"
    json_floor = "bare Starlette JSON endpoint (uvicorn; httpx POST)"
    rows = [
        Row(
            RAW,
            surface.raw,
            json_floor,
            bare_json,
            "≤ 1.5×",
            "the headline holds the client equal: one httpx POST of the same JSON-RPC body "
            f"on both sides, plus the {MODERN} envelope (_meta, mcp-method/mcp-name headers) "
            "the surface requires; the SDK-client rows below add the mcp client's own "
            "per-call work (request models, session bookkeeping, result validation), which "
            "the JSON floor's client does not do and claude's client does in its own process. "
            "get_agent_meta is answered from the host's cache of the agent's own meta "
            "(kept until the coordinator pushes a change; the coordinator hop alone: "
            f"p50 {surface.coordinator.p50:.3f} ms)",
        ),
        Row(
            "host CPU per raw tools/call get_agent_meta (calls per CPU-second)",
            surface.raw_cpu,
            "the JSON floor's process CPU per POST",
            json_cpu,
            "",
            "CPU time of the serving process over the same calls (/proc): what the surface "
            "costs, far less sensitive to a loaded machine than wall time; ratio = CPU per call "
            "÷ the floor's",
        ),
        Row(
            "host CPU per raw tools/call get_agent_meta (calls per CPU-second)",
            surface.raw_cpu,
            "the bare mcp SDK server's process CPU per raw tools/call",
            mcp_cpu,
            note="what the hyperhive surface adds to the SDK, in CPU (auth, gate, arguments, "
            "handler, events bus; a log line only for a refused or failed call)",
        ),
        Row(RAW, surface.raw, "bare mcp SDK server, 1 trivial tool (same raw POST)", bare_mcp_raw),
        Row(
            sdk,
            surface.sdk,
            json_floor,
            bare_json,
            note="informational: a different client on each side (see the headline's note); "
            f"json_response, protocol {MODERN} (single-exchange POSTs, no session: the path "
            "claude takes too)",
        ),
        Row(
            sdk, surface.sdk, "bare mcp SDK server, 1 trivial tool (same client and mode)", bare_mcp
        ),
    ]
    if surface.sdk.p50 > 5 * bare_mcp.p50:  # the host's responses stall (see the note)
        with http_floor("mcp-like-host", scratch) as (base, _):
            like_host = anyio.run(mcp_samples, f"{base}/mcp", {}, "ping", calls)
        rows.append(
            Row(
                sdk,
                surface.sdk,
                "the same bare mcp server on a listener made like the host's",
                like_host,
                note="the host binds its listener with proto 0, so asyncio never sets TCP_NODELAY "
                "and each keep-alive response waits out the client's delayed ACK (~40 ms here); "
                "this floor has the same listener, so the ratio is what the surface itself adds "
                f"(p50 {surface.sdk.p50 - like_host.p50:.3f} ms)",
            )
        )
    return rows


def _cpu_timed(
    pid: int, sampler: Callable[..., Awaitable[Latency]], *args: Any
) -> tuple[Latency, Throughput]:
    """``sampler``'s latencies, and the calls per CPU-second process ``pid`` spent on them."""
    before = cpu_seconds(pid)
    figure: Latency = anyio.run(sampler, *args)
    spent = cpu_seconds(pid) - before
    return figure, Throughput(WARMUP + args[-1], max(1, round(spent * 1e9)))


@dataclass(frozen=True)
class _Surface:
    sdk: Latency
    raw: Latency
    raw_cpu: Throughput
    coordinator: Latency


async def _surface_samples(
    paths: HivePaths, info: Mapping[str, Any], pid: int, calls: int
) -> _Surface:
    """The SDK client's and raw POSTs' calls through alice's surface, and the hop alone."""
    server = await alice_mcp_server(paths, info)
    sdk = await mcp_samples(server["url"], server["headers"], "get_agent_meta", calls)
    before = cpu_seconds(pid)
    raw = await _raw_mcp_samples(server["url"], server["headers"], "get_agent_meta", calls)
    raw_cpu = Throughput(WARMUP + calls, max(1, round((cpu_seconds(pid) - before) * 1e9)))
    async with connect(paths.agent_sock("alice")) as agent:
        coordinator = await _rpc_samples(agent, calls)
    return _Surface(sdk, raw, raw_cpu, coordinator)


async def alice_mcp_server(paths: HivePaths, info: Mapping[str, Any]) -> dict[str, Any]:
    """One turn writes alice's MCP config; its ``hyperhive`` entry (URL + headers)."""
    config_file = paths.agent_runtime("alice") / "mcp-config.json"
    state_url = f"{info['url']}/api/agents/alice/state"
    async with httpx.AsyncClient() as http:
        await _until_active(http, info, "alice")
        await call_once(paths.host_sock, OpSendReq(cmd="send", to="alice", body="hello"))
        with anyio.fail_after(120):
            while True:
                state = (await http.get(state_url, headers=_operator_headers(info))).json()
                if state["last_turn"] and state["turn_state"] == "idle":
                    break
                await anyio.sleep(0.05)
    server: dict[str, Any] = json.loads(config_file.read_text())["mcpServers"]["hyperhive"]
    return server


@asynccontextmanager
async def _mcp_client(url: str, headers: Mapping[str, str]) -> AsyncIterator[Client]:
    async with create_mcp_http_client(headers=dict(headers)) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


async def mcp_samples(url: str, headers: Mapping[str, str], tool: str, calls: int) -> Latency:
    out: list[int] = []
    async with _mcp_client(url, headers) as client:
        for i in range(WARMUP + calls):
            t0 = perf_counter_ns()
            result = await client.call_tool(tool, {})
            elapsed = perf_counter_ns() - t0
            if result.is_error:
                raise RuntimeError(f"{tool} failed: {result.content}")
            if i >= WARMUP:
                out.append(elapsed)
    return Latency.of(out)


async def _raw_mcp_samples(url: str, headers: Mapping[str, str], tool: str, calls: int) -> Latency:
    """tools/call as one plain httpx POST each, in the protocol-2026-07-28 single-exchange shape."""
    meta = {
        PROTOCOL_VERSION_META_KEY: MODERN,
        CLIENT_CAPABILITIES_META_KEY: {},
        CLIENT_INFO_META_KEY: {"name": "bench", "version": "0"},
    }
    sent = {
        **headers,
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": tool,
    }
    out: list[int] = []
    async with httpx.AsyncClient() as http:
        for i in range(WARMUP + calls):
            body = {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": tool, "arguments": {}, "_meta": meta},
            }
            t0 = perf_counter_ns()
            response = await http.post(url, json=body, headers=sent)
            elapsed = perf_counter_ns() - t0
            reply = response.json()
            if response.status_code != 200 or reply.get("result", {}).get("isError", True):
                raise RuntimeError(f"{tool} failed: {response.status_code} {reply}")
            if i >= WARMUP:
                out.append(elapsed)
    return Latency.of(out)


async def _json_samples(url: str, calls: int) -> Latency:
    out: list[int] = []
    async with httpx.AsyncClient() as http:
        for i in range(WARMUP + calls):
            body = {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": "ping", "arguments": {}},
            }
            t0 = perf_counter_ns()
            response = await http.post(url, json=body)
            response.json()
            elapsed = perf_counter_ns() - t0
            response.raise_for_status()
            if i >= WARMUP:
                out.append(elapsed)
    return Latency.of(out)


async def _rpc_samples(client: RpcClient, calls: int) -> Latency:
    request = GetAgentMetaReq(cmd="get_agent_meta")
    out: list[int] = []
    for i in range(WARMUP + calls):
        t0 = perf_counter_ns()
        await client.call(request)
        if i >= WARMUP:
            out.append(perf_counter_ns() - t0)
    return Latency.of(out)


# ---- sleeping agents: RSS, idle CPU, activation ----------------------------------------


@benchmark("agent_host.sleeping")
def sleeping_agents(ctx: Context) -> list[Row]:
    scales = (1, 50) if ctx.quick else (1, 100, 1000)
    idle_window = 2.0 if ctx.quick else 5.0
    host_rss: dict[int, int] = {}
    coord_rss: dict[int, int] = {}
    rows: list[Row] = []
    notes: list[str] = []
    for n in scales:
        agents = [f"a{i:04d}" for i in range(n)]
        # No agent is woken: claude is never run, the model server never asked.
        paths = _seed(ctx.scratch("s"), agents, "http://127.0.0.1:9", "/bin/false")
        t0 = perf_counter_ns()
        with serve(paths, agents) as coordinator:
            serve_ns = perf_counter_ns() - t0
            t1 = perf_counter_ns()
            with host(paths) as (proc, _):
                _wait_connected(paths, proc.pid, agents)
                host_ns = perf_counter_ns() - t1
                _wait_quiet(proc.pid)
                host_rss[n], coord_rss[n] = rss_bytes(proc.pid), rss_bytes(coordinator.pid)
                if n == scales[-1]:
                    c0, h0 = cpu_seconds(coordinator.pid), cpu_seconds(proc.pid)
                    time.sleep(idle_window)
                    c1, h1 = cpu_seconds(coordinator.pid), cpu_seconds(proc.pid)
                    notes.append(
                        f"idle CPU with {n} asleep over {idle_window:.0f} s: coordinator "
                        f"{(c1 - c0) / idle_window:.1%}, host {(h1 - h0) / idle_window:.1%} "
                        "of one core (each asleep agent re-polls its wait every 60 s)"
                    )
                    rows.append(
                        Row(
                            f"host start → {n} agents linked and asleep",
                            Throughput(n, host_ns),
                            f"serve start → {n} agent sockets listening",
                            Throughput(n, serve_ns),
                        )
                    )
    small, big = scales[0], scales[-1]
    per_agent = (host_rss[big] - host_rss[small]) / (big - small)
    per_coord = (coord_rss[big] - coord_rss[small]) / (big - small)
    mb = 1 << 20
    sizes = ", ".join(f"{n}: {host_rss[n] / mb:.1f} MB" for n in scales)
    notes.insert(
        0,
        f"host RSS by sleeping agents {sizes} → {per_agent / 1024:.0f} KB per sleeping agent "
        f"(goal ≤ 1 MB); coordinator {per_coord / 1024:.0f} KB per agent "
        f"({coord_rss[big] / mb:.1f} MB at {big})",
    )
    return [Row(r.benchmark, r.figure, r.floor_name, r.floor, "", "; ".join(notes)) for r in rows]


def _wait_connected(paths: HivePaths, pid: int, agents: Sequence[str]) -> None:
    """The coordinator placed every agent, and the host holds a socket per harness."""
    deadline = time.monotonic() + 300
    while True:
        # The host's sockets first, from /proc: the coordinator's `agents` view costs it
        # O(agents) per call, and polling it 20 times a second would slow what is measured.
        if socket_fds(pid) < len(agents) + 2 and time.monotonic() < deadline:
            time.sleep(0.05)
            continue
        rows = anyio.run(call_once, paths.host_sock, OpAgentsReq(cmd="agents"))
        placed = sum(1 for r in rows if r.running)
        # One socket per harness, plus the host link and the HTTP listener.
        if placed == len(agents) and socket_fds(pid) >= len(agents) + 2:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{placed}/{len(agents)} agents placed, host not linked")
        time.sleep(0.05)


def _wait_quiet(pid: int, window: float = 0.5, busy: float = 0.05) -> None:
    """Until the host stops working on start-up (attach, first long-polls)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(window)
        if cpu_seconds(pid) - before < busy * window:
            return
    raise RuntimeError(f"pid {pid} never went quiet")
