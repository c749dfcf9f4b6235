"""Many sleeping agents over three remote hosts (issue 14, "Tests"/"Speed").

Four network namespaces on one LAN (``tests/support/netns``): ``hivectl serve``
(SQLite store: the figures are the link's and the hosts', and a SQLite home
starts in a second; the multi-host store is PostgreSQL, whose own rows are in
``bench.postgres``) with ``[hostlink]`` over TLS in one, and a real ``hivectl
host --coordinator wss://…`` in each of the three others. Agents run
unsandboxed (as in ``agent_host.sleeping``: bwrap would create a system user per
agent on the machine running the bench); none is woken, so claude never runs.

Every agent is placed explicitly, as ``--host`` pins one: a third on each
host, written to the store before the coordinator starts, and none wanted
running yet. So each host dials in empty (its RSS then is its baseline), and
the operator's ``agent_start`` of every agent puts each on its pinned host. (A
restarted agent returns to the host it is assigned to, so restarting agents to
spread them, as this bench did, left them all on host 1.) Printed: host RSS
per sleeping agent (each host's RSS over its empty baseline), the
coordinator's host-link connections (one per host), idle CPU of the
coordinator and each host over a window, and bytes on each host's veth (both
ways) per minute idle, per host and per agent. Needs root (``ip netns``);
namespaces and processes go in ``finally``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from time import perf_counter_ns
from urllib.parse import urlsplit

from tests.support.hostlink import link_tls, start_remote_host
from tests.support.netns import Lan, lan, netns_available

from bench._hostprocs import rss_bytes
from bench._procs import cpu_seconds, seed_home
from bench.netlink import _coordinator, _credential, _op
from bench.registry import Context, Row, Throughput, benchmark
from hyperhive.config import HivePaths
from hyperhive.homelock import holder
from hyperhive.protocol import OpAgentsReq, OpHostsListReq, OpLifecycleReq
from hyperhive.store.sqlite import SqliteStore

__all__ = ["sleeping_over_three_hosts"]

HOSTS = ("h1", "h2", "h3")
SETTLE_S = 600.0  # every wait below is bounded by this
WAIT_REPOLL_S = 60  # an asleep agent's wait re-polls this often (harness)


@contextmanager
def _remote_host(
    net: Lan, home: Path, url: str, name: str, credential: Path, ca: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """``hivectl host`` in ``name``'s namespace, started as the tests start one."""
    proc = start_remote_host(home, name, url, credential, ca, argv_prefix=net.exec_prefix(name))
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _placed(paths: HivePaths) -> dict[str, int]:
    """Agents running per connected host."""
    return {h.name: len(h.agents) for h in _op(paths, OpHostsListReq(cmd="hosts_list"))}


def _until(
    what: str, check: Callable[[], bool], procs: list[subprocess.Popen[bytes]], home: Path
) -> None:
    deadline = time.monotonic() + SETTLE_S
    while not check():
        dead = [p for p in procs if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            logs = "".join(
                f"\n--- {f.name}\n" + f.read_text(errors="replace")[-1500:]
                for f in sorted(home.glob("*.log"))
            )
            raise RuntimeError(f"not reached: {what}{logs}")
        time.sleep(0.2)


def _all_running(paths: HivePaths, n: int) -> bool:
    rows = _op(paths, OpAgentsReq(cmd="agents"))
    return sum(1 for r in rows if r.running) == n


def _quiet(pids: list[int], window: float = 1.0, busy: float = 0.05) -> bool:
    before = [cpu_seconds(p) for p in pids]
    time.sleep(window)
    return all(cpu_seconds(p) - b < busy * window for p, b in zip(pids, before, strict=True))


def _link_bytes(net: Lan, role: str) -> int:
    """Bytes through the namespace's LAN leg, both ways (the host link is all it carries)."""
    out = subprocess.run(
        ["ip", "-n", net.roles[role], "-s", "-j", "link", "show"],
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
    ).stdout
    total = 0
    for link in json.loads(out):
        if link["ifname"] != "lo":
            stats = link["stats64"]
            total += stats["rx"]["bytes"] + stats["tx"]["bytes"]
    return total


def _link_connections(pid: int, port: int) -> int:
    """Established TCP connections on the coordinator's host-link port (its namespace)."""
    count = 0
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port and fields[3] == "01":  # ESTABLISHED
                count += 1
    return count


@benchmark("netlink.sleeping")
def sleeping_over_three_hosts(ctx: Context) -> list[Row]:
    problem = netns_available()
    if problem is not None:
        raise RuntimeError(f"cannot run: {problem}")
    n = 30 if ctx.quick else 1000
    # Long enough in the full run to hold a whole re-poll period of every asleep agent.
    idle_window = 10.0 if ctx.quick else WAIT_REPOLL_S + 5.0
    agents = [f"s{i:04d}" for i in range(n)]
    home = ctx.scratch("nls")
    with lan(["coord", *HOSTS]) as net, ExitStack() as stack:
        link_tls(home, net.addresses["coord"])
        paths = seed_home(home, agents)
        _mirror_caught_up(paths)
        expected = _pin(paths, agents)
        with (home / "hive.toml").open("a") as toml:
            toml.write(
                'claude_bin = "/bin/false"\ndashboard_port = 0\n'
                f'[hostlink]\nlisten = "{net.addresses["coord"]}:0"\n'
                'tls_cert = "link.pem"\ntls_key = "link.pem"\n'
            )
        t_serve = perf_counter_ns()
        url = stack.enter_context(_coordinator(net, home, within=SETTLE_S))
        serve_ns = perf_counter_ns() - t_serve
        coord_pid = _coordinator_pid(paths)
        link_port = urlsplit(url).port or 443
        creds = {h: _credential(paths, h) for h in HOSTS}
        procs: dict[str, subprocess.Popen[bytes]] = {}

        def start(name: str) -> None:
            procs[name] = stack.enter_context(
                _remote_host(net, home, url, name, creds[name], home / "ca.pem")
            )

        for name in HOSTS:
            start(name)
        _until(
            "every host connected",
            lambda: set(_placed(paths)) >= set(HOSTS),
            list(procs.values()),
            home,
        )
        _until(
            "hosts quiet", lambda: _quiet([procs[h].pid for h in HOSTS]), list(procs.values()), home
        )
        empty = {h: rss_bytes(procs[h].pid) for h in HOSTS}
        t_host = perf_counter_ns()
        for agent in agents:
            _op(paths, OpLifecycleReq(cmd="agent_start", agent=agent))
        _until(f"{n} agents running", lambda: _all_running(paths, n), list(procs.values()), home)
        host_ns = perf_counter_ns() - t_host
        placed = _placed(paths)
        if placed != expected:
            raise RuntimeError(f"agents landed as {placed}, not on their pins {expected}")
        pids = [coord_pid, *(procs[h].pid for h in HOSTS)]
        _until("everything quiet", lambda: _quiet(pids), list(procs.values()), home)
        rss = {h: rss_bytes(procs[h].pid) for h in HOSTS}
        connections = _link_connections(coord_pid, link_port)
        cpu0 = {p: cpu_seconds(p) for p in pids}
        bytes0 = {h: _link_bytes(net, h) for h in HOSTS}
        time.sleep(idle_window)
        cpu = {p: (cpu_seconds(p) - cpu0[p]) / idle_window for p in pids}
        per_min = {h: (_link_bytes(net, h) - bytes0[h]) * 60 / idle_window for h in HOSTS}
        coord_rss = rss_bytes(coord_pid)
    per_agent_rss = [(rss[h] - empty[h]) / placed[h] for h in HOSTS if placed.get(h)]
    kb = 1024
    mb = 1 << 20
    total_min = sum(per_min.values())
    note = "; ".join(
        [
            "agents pinned per host " + ", ".join(f"{h}: {placed.get(h, 0)}" for h in HOSTS),
            "host RSS per sleeping agent "
            + ", ".join(f"{v / kb:.0f} KB" for v in per_agent_rss)
            + " (each host over its empty RSS "
            + ", ".join(f"{empty[h] / mb:.1f} MB" for h in HOSTS)
            + ")",
            f"coordinator {coord_rss / mb:.1f} MB, {connections} host-link connection(s) for "
            f"{len(HOSTS)} hosts and {n} agents",
            f"idle CPU over {idle_window:.0f} s: coordinator {cpu[coord_pid]:.1%}, hosts "
            + ", ".join(f"{cpu[procs[h].pid]:.1%}" for h in HOSTS)
            + " of one core",
            "link bytes idle (veth, both ways) per minute: "
            + ", ".join(f"{h} {per_min[h] / kb:.1f} KB" for h in HOSTS)
            + f"; {total_min / n:.0f} B per agent per minute (each asleep agent re-polls its "
            f"wait every {WAIT_REPOLL_S} s)",
            "coordinator on SQLite; agents unsandboxed",
        ]
    )
    return [
        Row(
            f"3 remote hosts (TLS, own netns) → {n} agents started (pinned) and asleep",
            Throughput(n, host_ns),
            f"serve start → host link listening ({n} agents known)",
            Throughput(n, serve_ns),
            note=note,
        )
    ]


def _pin(paths: HivePaths, agents: list[str]) -> dict[str, int]:
    """Pin agent i to host i mod 3 and want none running yet, in the store before the
    coordinator opens it (what ``spawn --host`` records, without a thousand spawns);
    the agents per host expected."""

    async def write() -> None:
        store = await SqliteStore.open(paths.db)
        try:
            for i, agent in enumerate(agents):
                await store.placements.assign(agent, HOSTS[i % len(HOSTS)], pinned=True)
                await store.agents.set_desired(agent, False)
        finally:
            await store.close()

    asyncio.run(write())
    return {h: len(agents[i :: len(HOSTS)]) for i, h in enumerate(HOSTS)}


def _mirror_caught_up(paths: HivePaths) -> None:
    """Commit the seeded ``meta/`` once and mark the mirror as having exported the log.

    The coordinator adopts the seeded configs into its store, then mirrors the deploy
    log into ``meta/`` one git commit per entry before it listens: 1,000 commits, which
    took over ten minutes on a loaded 2-core machine. The files are already there, so
    the mirror is told it is caught up (its sequence file), and serve starts at once.
    """
    ident = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "seed"]):
        subprocess.run(
            ["git", *ident, "-C", str(paths.meta), *args], check=True, capture_output=True
        )
    (paths.meta / ".git" / "hyperhive-mirror-seq").write_text(f"{10**9}\n")


def _coordinator_pid(paths: HivePaths) -> int:
    """The serving coordinator's pid: the holder of the home's coordinator lock."""
    pid = holder(paths, "coordinator")
    if not pid:
        raise RuntimeError("no coordinator holds the home")
    return pid
