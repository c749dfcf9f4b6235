"""Lifecycle and isolation beside same-run floors (issue 6, "Benchmark").

Every figure comes from real ``hivectl serve`` and ``hivectl host``
processes, observed from outside as an operator could: the operator socket,
the requesting agent's own socket (what its ``request_init_config`` MCP tool
calls), ``hive.db`` opened read-only, and the host's per-agent event stream
(its operator token is in ``run/agent-host.json``).

- ``lifecycle.spawn``: the operator's ``approve`` of a manager's
  ``request_init_config`` → the child's harness attached and long-polling.
  The harness's ``attach`` bumps ``agent_state.incarnation`` and its first
  ``wait`` follows on the same socket one round trip later, so the bump,
  polled read-only, stands for the first ``wait``.
- ``lifecycle.bwrap``: one scripted claude turn in a hive with
  ``runtime = "bwrap"`` (as root: the agent's own system user) beside the
  same turn in a hive with ``runtime = "unsandboxed"``, turns alternating
  between the two so both see the same machine.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import AsyncExitStack, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter_ns
from typing import Any

import anyio
import httpx
from anyio.streams.memory import MemoryObjectReceiveStream
from tests.support.model_server import ModelServer, always, text

from bench._hostprocs import host
from bench._procs import serve
from bench.agent_host import _operator_headers, _pump_events, _until_active
from bench.registry import Context, Latency, Row, benchmark
from hyperhive.agent.bwrap import SYSTEM_LINKS, SYSTEM_RO, Isolation, isolated_argv
from hyperhive.agent.host import resolve_claude_bin
from hyperhive.agent.isolation import readonly_paths
from hyperhive.agent.sandbox import DEFAULT_PATH
from hyperhive.client import RpcClient, connect
from hyperhive.config import AgentConfig, HivePaths, dump_agent_config
from hyperhive.permissions import ToolGroup
from hyperhive.protocol import (
    OpAgentsReq,
    OpLifecycleReq,
    OpResolveReq,
    OpSendReq,
    RequestInitConfigReq,
)
from hyperhive.store import Store
from hyperhive.store.sqlite import SqliteStore
from hyperhive.sysusers import agent_user, remove_user

__all__ = ["bwrap_turn", "spawn_latency"]

MANAGER = "queen"
CHILD_CONFIG = 'tool_groups = ["messaging"]\n'
BODY = "status: build finished, 3 tests failed in tests/unit; see state/notes.md for the log"
SETTLE = 0.05  # between samples: let the previous one's stragglers finish
POLL = 0.0002  # hive.db poll interval while waiting for an attach


def _write_home(
    home: Path, agents: Mapping[str, AgentConfig], runtime: str, claude: str
) -> HivePaths:
    paths = HivePaths(home)
    (paths.meta / "agents").mkdir(parents=True, exist_ok=True)
    for name, config in agents.items():
        paths.applied_config(name).write_text(dump_agent_config(config))
    (home / "hive.toml").write_text(
        f"runtime = {json.dumps(runtime)}\nclaude_bin = {json.dumps(claude)}\n"
    )
    return paths


async def _until(check: Any, within: float = 60.0, every: float = 0.01) -> Any:
    with anyio.fail_after(within):
        while True:
            value = await check()
            if value:
                return value
            await anyio.sleep(every)


# ---- approve → the child's first wait -------------------------------------------------


@dataclass
class _Spawns:
    first_wait: list[int]  # approve sent → the child's attach committed
    approve_rpc: list[int]  # approve sent → its answer back
    restart: list[int]  # agents start of a stopped, known agent → its attach committed


@benchmark("lifecycle.spawn")
def spawn_latency(ctx: Context) -> list[Row]:
    samples = 5 if ctx.quick else 20
    home = ctx.scratch("l")
    # No child ever gets mail, so claude is never run; the manager is stopped
    # before measuring, so its wake-up turn on approval_resolved is not either.
    manager = AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))
    paths = _write_home(home, {MANAGER: manager}, "unsandboxed", "/bin/false")
    with serve(paths, [MANAGER]), host(paths) as (_, info):
        got = anyio.run(_spawns, paths, info, samples)
    bare = _bare_python(samples)
    spawn = Latency.of(got.first_wait)
    rpc = Latency.of(got.approve_rpc)
    note = (
        'runtime = "unsandboxed" (the harness runs in the host process either way; under '
        "bwrap the child's system user is also created, not measured here); a child is "
        "attached when its "
        "agent_state.incarnation bumps in hive.db (polled read-only every 0.2 ms), its "
        "first wait follows one socket round trip later; the approve RPC itself "
        f"(approval row, proposed repo seeded, meta commit, activation pushed) "
        f"p50 {rpc.p50:.1f} · p99 {rpc.p99:.1f} ms; one warm-up spawn dropped; children "
        "stay running, so spawn k has k idle siblings"
    )
    name = "approve(request_init_config) → child's first wait"
    return [
        Row(
            name,
            spawn,
            "agents start of a stopped, known agent → its first wait",
            Latency.of(got.restart),
            note=note,
        ),
        Row(name, spawn, "bare process: python -c pass, spawn → exit", bare),
    ]


async def _spawns(paths: HivePaths, info: Mapping[str, Any], samples: int) -> _Spawns:
    out = _Spawns([], [], [])
    db = await SqliteStore.open(paths.db, readonly=True)
    try:
        async with (
            httpx.AsyncClient(timeout=None) as http,
            connect(paths.host_sock) as op,
            connect(paths.agent_sock(MANAGER)) as queen,
        ):
            await _until_active(http, info, MANAGER)
            await op.call(OpLifecycleReq(cmd="agent_kill", agent=MANAGER))
            for i in range(samples + 1):
                child = f"w{i:02d}"
                asked = await queen.call(
                    RequestInitConfigReq(cmd="request_init_config", name=child, config=CHILD_CONFIG)
                )
                approval = int(asked["approval_id"])
                await anyio.sleep(SETTLE)
                first_wait, rpc = await _timed_attach(
                    db, child, 0, op, OpResolveReq(cmd="approve", approval_id=approval)
                )
                if i:
                    out.first_wait.append(first_wait)
                    out.approve_rpc.append(rpc)
            # The floor: the same activation path with nothing to create or commit.
            target = "w00"
            for i in range(samples + 1):
                await op.call(OpLifecycleReq(cmd="agent_kill", agent=target))
                await _until_gone(http, info, target)
                await anyio.sleep(SETTLE)
                before = await _incarnation(db, target)
                took, _ = await _timed_attach(
                    db, target, before, op, OpLifecycleReq(cmd="agent_start", agent=target)
                )
                if i:
                    out.restart.append(took)
            rows = await op.call(OpAgentsReq(cmd="agents"))
            running = sum(1 for r in rows if r["running"])
            if running != samples + 1:
                raise RuntimeError(f"{running} children running, expected {samples + 1}")
    finally:
        await db.close()
    return out


async def _timed_attach(
    db: Store, agent: str, after: int, op: RpcClient, request: Any
) -> tuple[int, int]:
    """(request sent → ``agent``'s incarnation passed ``after``, request's own round trip)."""
    rpc_ns = 0
    t0 = perf_counter_ns()

    async def call() -> None:
        nonlocal rpc_ns
        await op.call(request)
        rpc_ns = perf_counter_ns() - t0

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        seen = await _poll_attach(db, agent, after)
    return seen - t0, rpc_ns


async def _poll_attach(db: Store, agent: str, after: int) -> int:
    deadline = time.monotonic() + 60
    while await _incarnation(db, agent) <= after:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{agent} never attached (incarnation stayed {after})")
        await anyio.sleep(POLL)
    return perf_counter_ns()


async def _incarnation(db: Store, agent: str) -> int:
    """The agent's incarnation, read through a read-only store beside the coordinator."""
    return next((a.incarnation for a in await db.agents.all() if a.name == agent), 0)


async def _until_gone(http: httpx.AsyncClient, info: Mapping[str, Any], agent: str) -> None:
    """The host dropped ``agent``'s runtime (its API answers 404)."""
    url = f"{info['url']}/api/agents/{agent}/state"

    async def gone() -> bool:
        response = await http.get(url, headers=_operator_headers(info))
        return response.status_code == 404

    await _until(gone)


def _bare_python(samples: int) -> Latency:
    out = []
    for i in range(samples + 1):
        t0 = perf_counter_ns()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        if i:
            out.append(perf_counter_ns() - t0)
    return Latency.of(out)


# ---- a claude turn under bwrap vs unsandboxed ----------------------------------------------


@dataclass
class _Turns:
    claude: list[int]  # the host's turn_start → turn_end
    whole: list[int]  # operator send → turn_end

    def claude_of(self) -> list[int]:
        return self.claude

    def whole_of(self) -> list[int]:
        return self.whole


@benchmark("lifecycle.bwrap")
def bwrap_turn(ctx: Context) -> list[Row]:
    if os.geteuid() != 0:
        raise RuntimeError("needs root: a bwrap agent runs as its own system user")
    if shutil.which("bwrap") is None:
        raise RuntimeError("needs bubblewrap (Debian package bubblewrap)")
    samples = 5 if ctx.quick else 20
    agent = f"bench-{os.getpid()}"
    claude = resolve_claude_bin(None)
    with ModelServer(always(text("done"))) as model, ExitStack() as stack:
        config = AgentConfig(
            env={
                "ANTHROPIC_BASE_URL": model.url,
                "ANTHROPIC_API_KEY": "bench-key",
                "CLAUDE_CODE_MAX_RETRIES": "0",
            }
        )
        hives: dict[str, tuple[HivePaths, Mapping[str, Any]]] = {}
        for runtime in ("bwrap", "unsandboxed"):
            home = stack.enter_context(_open_home(ctx.workdir.parent, agent))
            paths = _write_home(home, {agent: config}, runtime, claude)
            stack.enter_context(serve(paths, [agent]))
            _, info = stack.enter_context(host(paths))
            hives[runtime] = (paths, info)
        got = anyio.run(_alternate, hives, agent, samples)
        uid = _owner(hives["bwrap"][0].agent_home(agent) / ".claude")
        user = agent_user(hives["bwrap"][0], agent)
        boxed_true, bare_true = _bare_sandbox(hives["bwrap"][0], agent, claude, samples * 5)
    boxed, plain = got["bwrap"], got["unsandboxed"]
    if uid == 0:
        raise RuntimeError("the bwrap hive's claude ran as root; the figure would mislead")
    how = (
        f"; as root, claude as {user} (uid {uid}) under setpriv + bwrap, "
        "no resource limits (no cgroup join); the scripted model replies one text block; "
        "two hives side by side, turns alternating, one warm-up turn each dropped"
    )
    rows = []
    for label, pick, more in (
        ("claude turn under bwrap: host turn_start → turn_end", _Turns.claude_of, how),
        ("claude turn under bwrap: operator send → turn_end", _Turns.whole_of, ""),
    ):
        fig, floor = Latency.of(pick(boxed)), Latency.of(pick(plain))
        paired = sorted(b - u for b, u in zip(pick(boxed), pick(plain), strict=True))
        added = (
            f"bwrap adds p50 {fig.p50 - floor.p50:+.1f} ms · p99 {fig.p99 - floor.p99:+.1f} ms "
            f"(ratio {fig.p50 / floor.p50:.2f}× · {fig.p99 / floor.p99:.2f}×); median of the "
            f"paired per-round differences {paired[len(paired) // 2] / 1e6:+.1f} ms"
        )
        rows.append(
            Row(label, fig, "the same turn unsandboxed (same run)", floor, "", added + more)
        )
    rows.append(
        Row(
            "setpriv + bwrap around /bin/true (the agent's mounts)",
            boxed_true,
            "/bin/true, spawn → exit",
            bare_true,
            "",
            "the sandbox's own start-up cost, argv from hyperhive.agent.bwrap.isolated_argv "
            f"as the agent's user: adds p50 {boxed_true.p50 - bare_true.p50:+.1f} ms",
        )
    )
    return rows


def _bare_sandbox(paths: HivePaths, agent: str, claude: str, samples: int) -> tuple[Latency, ...]:
    """``/bin/true`` under the agent's sandbox, and bare, alternating."""
    user = pwd.getpwnam(agent_user(paths, agent))
    system = (*SYSTEM_RO, *(link for link, _ in SYSTEM_LINKS))
    iso = Isolation(
        agent=agent,
        uid=user.pw_uid,
        gid=user.pw_gid,
        rw=(paths.agent_state(agent), paths.agent_home(agent), paths.agent_work(agent)),
        ro=(*readonly_paths(claude), paths.agent_runtime(agent)),
        sockets=(paths.agent_sock(agent),),
        existing=frozenset(p for p in system if os.path.lexists(p)),
    )
    argvs = (isolated_argv(iso, ["/bin/true"], paths.agent_work(agent)), ["/bin/true"])
    out: tuple[list[int], list[int]] = ([], [])
    for i in range(samples + 1):
        for argv, got in zip(argvs, out, strict=True):
            t0 = perf_counter_ns()
            subprocess.run(argv, check=True, cwd="/", env={"PATH": DEFAULT_PATH})
            if i:
                got.append(perf_counter_ns() - t0)
    return Latency.of(out[0]), Latency.of(out[1])


@contextmanager
def _open_home(parent: Path, agent: str) -> Iterator[Path]:
    """A home agent users can traverse (mkdtemp dirs are 0700); its user removed after."""
    home = Path(tempfile.mkdtemp(prefix="hhb-bw-", dir=parent))
    home.chmod(0o755)
    try:
        yield home
    finally:
        remove_user(HivePaths(home), agent)  # before the home (and its hive id) goes
        shutil.rmtree(home, ignore_errors=True)


def _owner(path: Path) -> int:
    try:
        return path.stat().st_uid
    except FileNotFoundError:
        return -1


async def _alternate(
    hives: Mapping[str, tuple[HivePaths, Mapping[str, Any]]], agent: str, samples: int
) -> dict[str, _Turns]:
    out = {runtime: _Turns([], []) for runtime in hives}
    async with httpx.AsyncClient(timeout=None) as http, anyio.create_task_group() as tg:
        streams: dict[str, MemoryObjectReceiveStream[dict[str, Any]]] = {}
        for runtime, (_, info) in hives.items():
            await _until_active(http, info, agent)
            send, streams[runtime] = anyio.create_memory_object_stream[dict[str, Any]](1000)
            url = f"{info['url']}/api/agents/{agent}/events"
            tg.start_soon(_pump_events, http, url, _operator_headers(info), send)
        async with AsyncExitStack() as ops:
            clients = {
                runtime: await ops.enter_async_context(connect(paths.host_sock))
                for runtime, (paths, _) in hives.items()
            }
            order = list(clients)
            for i in range(samples + 1):
                for runtime in order if i % 2 else order[::-1]:  # neither always goes first
                    op = clients[runtime]
                    claude, whole = await _turn(op, agent, streams[runtime])
                    if i:
                        out[runtime].claude.append(claude)
                        out[runtime].whole.append(whole)
        tg.cancel_scope.cancel()
    return out


async def _turn(
    op: RpcClient, agent: str, events: MemoryObjectReceiveStream[dict[str, Any]]
) -> tuple[int, int]:
    """One turn: (turn_start → turn_end, operator send → turn_end), from the host's clock."""
    await anyio.sleep(SETTLE)  # the harness parks in its long-poll
    before = time.time()
    await op.call(OpSendReq(cmd="send", to=agent, body=BODY))
    start: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    with anyio.fail_after(120):
        async for event in events:
            if event["at"] < before:
                continue  # the stream's replayed history
            if event["kind"] == "turn_start":
                start = event
            elif event["kind"] == "turn_end":
                end = event
            elif end is not None and event.get("turn_state") == "idle":
                break  # reported; the harness waits again
    assert start is not None and end is not None
    if end["outcome"] != "ok":
        raise RuntimeError(f"{agent}: a turn ended {end['outcome']}; see its agent log")
    return _ns(end["at"] - start["at"]), _ns(end["at"] - before)


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)
