"""The hive as production runs it, under ``kill -9``: PostgreSQL, a standby coordinator,
and two remote hosts on their own network stacks.

Two ``hivectl serve`` processes share one PostgreSQL database and one home, in
network namespace ``coord`` (one address: the Service the hosts dial). Agent
hosts ``h1`` and ``h2`` run in namespaces of their own, each with a home of its
own (no shared disk), and dial the active coordinator's link over TCP with TLS.
Half the agents run on each host (``max_agents``); their claude is the real CLI
behind the soak's pid-tagging wrapper, answered by the soak's model
(:class:`~tests.chaos.soak_model.SoakModel`), which passes chains of messages
between agents — across hosts — and sets reminders, while the operator sends
new chains the whole time.

A seeded schedule ``kill -9``s the active coordinator (the standby takes over;
the killed one comes back as the new standby) and whole hosts: a host leaves the
network and its processes die, its agents show ``lost`` once its lease
expires, then it comes back and they run there again. Afterwards the hive
settles, every process stops gracefully, and the messages are counted against
the known set answered ok: sent, delivered, duplicated (shown to more than one
claude before its ack: at-least-once at work) and lost, which must be none —
nor may an acked message be shown again.

Bounded in CI (``CI_PLAN``); ``HIVE_CHAOS_FULL=1`` (``scripts/chaos``) runs
``FULL_PLAN`` and ``HIVE_CHAOS_REPORT`` gets its figures.
"""

from __future__ import annotations

import json
import logging
import os
import random
import secrets
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from hyperhive.client import call_once
from hyperhive.config import AgentConfig, HivePaths
from hyperhive.errors import HiveError
from hyperhive.protocol import AgentView, OpAgentsReq
from tests.chaos.rig import FULL, chaos_wrapper, claude_starts, kill_strays, live_claudes
from tests.chaos.soak_model import Ledger, SoakModel
from tests.chaos.test_failover import _log, _took_over
from tests.chaos.test_soak import SEED, Operator, Plan, Tally, _check_messages, _check_reminders
from tests.support.hive import agent_env, seed_home, start_serve
from tests.support.hostlink import credential_from, link_tls, start_remote_host, write_credential
from tests.support.model_server import ModelServer
from tests.support.netns import Lan, lan, netns_available
from tests.support.procs import hivectl, stop, wait_until
from tests.support.stores import read_hive, read_hive_sync
from tests.support.surfaces import until_async

log = logging.getLogger(__name__)

HOSTS = ("h1", "h2")
# Past a coordinator's takeover (its own lease is 5 s): a failover loses no host.
HOST_LEASE = 12.0
# A bound on a coordinator's start beside two hosts' turns on a loaded machine, not a claim.
START_WITHIN = 240.0
# agents, coordinator kills, host kills, -, -, gap between kills, operator's gap, settle, timeout
CI_PLAN = Plan(4, 2, 2, 0, 0, (1.0, 3.0), (2.0, 4.0), 300, 900)
FULL_PLAN = Plan(6, 6, 6, 0, 0, (2.0, 5.0), (1.0, 2.5), 900, 3600)
PLAN = FULL_PLAN if FULL else CI_PLAN

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.e2e,
    pytest.mark.timeout(PLAN.timeout),
    pytest.mark.skipif(netns_available() is not None, reason=str(netns_available())),
]


@dataclass
class Figures:
    """The run's counts (published with the other chaos figures)."""

    seed: int = SEED
    mode: str = "full" if FULL else "ci"
    run: str = "production: PostgreSQL, a standby coordinator, 2 remote hosts"
    agents: int = 0
    coordinator_kills: int = 0
    host_kills: int = 0
    takeover_seconds: list[float] = field(default_factory=list)
    agents_seen_lost: int = 0
    operator_sends_ok: int = 0
    operator_sends_failed: int = 0
    agent_sends_ok: int = 0
    agent_sends_across_hosts: int = 0
    messages_sent: int = 0
    messages_to_agents: int = 0
    delivered: int = 0
    duplicated: int = 0
    lost: int = 0
    acked_then_shown_again: int = 0
    # Mail offered to a running turn that its model was shown (in a round of its own, or
    # beside a step's tool results); one acked but never shown counts in ``lost``.
    midturn_shown_own_round: int = 0
    midturn_shown_beside_tool_results: int = 0
    # Of those, shown in no other way (neither a wake prompt nor a round of their own).
    midturn_shown_only_beside_tool_results: int = 0
    reminders: int = 0
    claude_processes: int = 0
    chaos_seconds: float = 0.0
    settle_seconds: float = 0.0


@dataclass
class Hive:
    """The processes: two coordinators on one home, a host per namespace."""

    home: Path
    net: Lan
    ca_file: Path
    url: str
    record: Path
    active: subprocess.Popen[bytes] | None = None
    standby: subprocess.Popen[bytes] | None = None
    hosts: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    creds: dict[str, Path] = field(default_factory=dict)
    serves: int = 0  # serve-N.log: one log per coordinator process
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def paths(self) -> HivePaths:
        return HivePaths(self.home)

    def host_home(self, name: str) -> Path:
        return self.home.parent / name

    def start_serve(self, *, wait: bool) -> tuple[subprocess.Popen[bytes], str]:
        self.serves += 1
        name = f"serve-{self.serves}.log"
        proc = start_serve(
            self.home, wait=wait, log_name=name, argv_prefix=self.net.exec_prefix("coord")
        )
        self.procs.append(proc)
        return proc, name

    def start_host(self, name: str) -> None:
        proc = start_remote_host(
            self.host_home(name),
            name,
            self.url,
            self.creds[name],
            self.ca_file,
            self.net.exec_prefix(name),
        )
        self.hosts[name] = proc
        self.procs.append(proc)

    def standing_by(self, proc: subprocess.Popen[bytes], log_name: str) -> None:
        def waiting() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"{log_name} exited {proc.returncode}\n{self.logs()}")
            return "standing by" in _log(self.home, log_name)

        try:
            wait_until(waiting, START_WITHIN, f"{log_name} stands by")
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.logs()}") from None

    def logs(self) -> str:
        files = sorted(self.home.glob("*.log")) + [
            f for h in HOSTS for f in sorted(self.host_home(h).glob("*.log"))
        ]
        return "\n".join(f"--- {f.name}\n{f.read_text(errors='replace')[-4000:]}" for f in files)


def _seed(tmp_path: Path, net: Lan, model_url: str, claude: Path, pg_url: str, port: int) -> Hive:
    home = tmp_path / "coord"
    ca_file = link_tls(home / "tls", net.addresses["coord"], tmp_path / "ca.pem")
    agents = [f"a{i:02d}" for i in range(PLAN.agents)]
    seed_home(
        home,
        {a: AgentConfig(env=agent_env(model_url)) for a in agents},
        hive_toml=(
            # Inline: seed_home appends the store's line, which must stay top-level.
            f'claude_bin = "{claude}"\ndashboard_port = 0\n'
            f'hostlink = {{ listen = "{net.addresses["coord"]}:{port}", '
            'tls_cert = "tls/link.pem", tls_key = "tls/link.pem", '
            f"lease_seconds = {HOST_LEASE} }}\n"
        ),
        store_url=pg_url,
    )
    for host in HOSTS:
        (tmp_path / host).mkdir()
        (tmp_path / host / "hive.toml").write_text(
            f'claude_bin = "{claude}"\nruntime = "unsandboxed"\n'
            f"max_agents = {PLAN.agents // len(HOSTS)}\n"
        )
    return Hive(home, net, ca_file, f"wss://{net.addresses['coord']}:{port}", tmp_path / "claudes")


async def _agents(paths: HivePaths) -> dict[str, AgentView] | None:
    try:
        rows = await call_once(paths.host_sock, OpAgentsReq(cmd="agents"), within=10)
    except (HiveError, OSError):
        return None  # between coordinators
    return {r.name: r for r in rows}


async def _until_agents(
    hive: Hive, what: str, check: Callable[[dict[str, AgentView]], bool], within: float = 180
) -> None:
    async def met() -> bool:
        rows = await _agents(hive.paths)
        return rows is not None and check(rows)

    try:
        await until_async(met, within)
    except TimeoutError:
        raise AssertionError(f"{what}: not within {within:.0f} s\n{hive.logs()}") from None


class Chaos:
    """The seeded schedule: the active coordinator or a whole host, killed and brought back."""

    def __init__(self, hive: Hive, placed: dict[str, str], rng: random.Random) -> None:
        self.hive = hive
        self.placed = placed  # agent → its host
        self.rng = rng
        self.figures = Figures(agents=len(placed))

    async def run(self) -> None:
        actions = ["coordinator"] * PLAN.serve_kills + ["host"] * PLAN.host_kills
        self.rng.shuffle(actions)
        hosts = iter(HOSTS * PLAN.host_kills)
        for action in actions:  # paced: the chaos schedule's random gaps
            await anyio.sleep(self.rng.uniform(*PLAN.gap))
            if action == "coordinator":
                await self._kill_coordinator()
            else:
                await self._kill_host(next(hosts))

    async def _kill_coordinator(self) -> None:
        hive = self.hive
        assert hive.active is not None and hive.standby is not None
        killed = hive.active
        killed.send_signal(signal.SIGKILL)
        await anyio.to_thread.run_sync(lambda: killed.wait(timeout=30))
        killed_at = time.monotonic()
        self.figures.coordinator_kills += 1
        standby_log = f"serve-{hive.serves}.log"
        try:
            taken = await anyio.to_thread.run_sync(_took_over, hive.home, standby_log)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{hive.logs()}") from None
        self.figures.takeover_seconds.append(round(taken - killed_at, 1))
        # The killed one comes back, as the standby.
        hive.active = hive.standby
        hive.standby, name = hive.start_serve(wait=False)
        await anyio.to_thread.run_sync(hive.standing_by, hive.standby, name)

    async def _kill_host(self, name: str) -> None:
        """The machine dies: off the network, its processes gone; back after its lease."""
        hive = self.hive
        mine = sorted(a for a, h in self.placed.items() if h == name)
        hive.net.partition(name)
        proc = hive.hosts[name]
        proc.send_signal(signal.SIGKILL)
        await anyio.to_thread.run_sync(lambda: proc.wait(timeout=30))
        await anyio.to_thread.run_sync(kill_strays, hive.record, hive.host_home(name))
        self.figures.host_kills += 1
        await _until_agents(
            hive,
            f"{name}'s agents {mine} lost",
            lambda rows: all(rows[a].lost_on == name and not rows[a].running for a in mine),
            HOST_LEASE * 6,
        )
        self.figures.agents_seen_lost += len(mine)
        hive.net.heal(name)
        await anyio.to_thread.run_sync(hive.start_host, name)
        await _until_agents(
            hive,
            f"{name}'s agents {mine} back on it",
            lambda rows: all(rows[a].running and rows[a].host == name for a in mine),
        )


def _unsettled(hive: Hive) -> list[str]:
    """Why the hive is not quiet yet (empty = settled)."""
    rows = read_hive_sync(hive.paths)
    why = []
    if unacked := sum(m.recipient != "operator" and not m.acked for m in rows.messages):
        why.append(f"{unacked} messages to agents unacked")
    if unfired := sum(r.fired_at is None for r in rows.reminders):
        why.append(f"{unfired} reminders not fired")
    if live := [p for h in HOSTS for p in live_claudes(hive.record, hive.host_home(h))]:
        why.append(f"{len(live)} claude processes running")
    return why


async def _settle(hive: Hive) -> None:
    """Nothing pending, twice in a row a second apart."""
    deadline = time.monotonic() + PLAN.settle_within
    quiet, why = 0, ["not looked yet"]
    while quiet < 2:  # paced: settled means quiet twice in a row, a second apart
        if time.monotonic() > deadline:
            raise AssertionError(f"not settled in {PLAN.settle_within:.0f} s: {why}\n{hive.logs()}")
        why = await anyio.to_thread.run_sync(_unsettled, hive)
        quiet = quiet + 1 if not why else 0
        await anyio.sleep(1.0 if not why else 0.5)


async def test_a_production_shaped_hive_loses_no_message_under_kill_9(
    tmp_path: Path, claude_bin: Path, pg_url: str
) -> None:
    rng = random.Random(SEED)
    agents = [f"a{i:02d}" for i in range(PLAN.agents)]
    # Chains and reminders: bash tasks would run on the hosts' disks, which the soak checks.
    model = SoakModel(agents, SEED, p_bash=0.0)
    with lan(["coord", *HOSTS]) as net:
        async with ModelServer(model, host=net.own_address) as server:
            claude = chaos_wrapper(tmp_path, claude_bin, tmp_path / "claudes")
            port = 20000 + secrets.randbelow(20000)  # the namespace's own: nothing else binds
            hive = _seed(tmp_path, net, server.url, claude, pg_url, port)
            try:
                figures = await _run(hive, agents, model, rng)
            finally:
                for proc in hive.procs:
                    stop(proc)
                for host in HOSTS:
                    kill_strays(hive.record, hive.host_home(host))
    _report(figures)


async def _run(hive: Hive, agents: list[str], model: SoakModel, rng: random.Random) -> Figures:
    hive.active, _ = hive.start_serve(wait=True)
    hive.standby, name = hive.start_serve(wait=False)
    await anyio.to_thread.run_sync(hive.standing_by, hive.standby, name)
    for host in HOSTS:
        made = await anyio.to_thread.run_sync(partial(hivectl, hive.home, "hosts", "add", host))
        path = hive.host_home(host) / "credential"
        hive.creds[host] = write_credential(path, credential_from(made.stdout))
        await anyio.to_thread.run_sync(hive.start_host, host)
    await _until_agents(
        hive, "every agent running", lambda rows: all(rows[a].running for a in agents)
    )
    rows = await _agents(hive.paths)
    assert rows is not None
    placed = {a: str(rows[a].host) for a in agents}
    assert sorted(placed.values()) == sorted(HOSTS * (len(agents) // len(HOSTS))), placed

    operator = Operator(hive.paths, agents, random.Random(rng.random()), PLAN)
    chaos = Chaos(hive, placed, random.Random(rng.random()))
    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        stop_sending = anyio.Event()
        tg.start_soon(operator.run, stop_sending)
        await chaos.run()
        stop_sending.set()
    figures = chaos.figures
    figures.chaos_seconds = round(time.monotonic() - started, 1)
    started = time.monotonic()
    await _settle(hive)
    figures.settle_seconds = round(time.monotonic() - started, 1)
    # Hosts say goodbye first, then both coordinators stop.
    for proc in [*hive.hosts.values(), hive.active, hive.standby]:
        assert proc is not None
        proc.send_signal(signal.SIGTERM)
        code = await anyio.to_thread.run_sync(partial(proc.wait, timeout=120))
        assert code == 0, hive.logs()

    with model.lock:
        ledger = model.ledger
    db = await read_hive(hive.paths)
    tally = Tally(agents=len(agents), store="postgresql")
    problems = _check_messages(db, agents, operator, ledger, claude_starts(hive.record), tally)
    problems += _check_reminders(db, tally)
    _count(figures, operator, ledger, placed, tally, problems)

    assert ledger.untagged == 0, "some API requests carried no claude pid"
    assert figures.coordinator_kills == PLAN.serve_kills
    assert figures.host_kills == PLAN.host_kills
    assert figures.agents_seen_lost == PLAN.host_kills * len(agents) // len(HOSTS)
    assert figures.operator_sends_ok > 0 and figures.agent_sends_across_hosts > 0
    assert figures.delivered == figures.messages_to_agents > 0
    assert (figures.lost, figures.acked_then_shown_again) == (0, 0), figures
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:60])
    return figures


def _count(
    figures: Figures,
    operator: Operator,
    ledger: Ledger,
    placed: dict[str, str],
    tally: Tally,
    problems: list[str],
) -> None:
    """The figures, from the checks' tally and the known set of sends answered ok."""
    figures.operator_sends_ok = len(operator.confirmed)
    figures.operator_sends_failed = operator.failed
    figures.agent_sends_ok = len(ledger.sent_ok)
    figures.agent_sends_across_hosts = sum(
        1 for sender, to in ledger.sent_ok.values() if to in placed and placed[to] != placed[sender]
    )
    figures.messages_sent = len(set(operator.confirmed) | set(ledger.sent_ok))
    figures.messages_to_agents = tally.messages_to_agents
    shown = tally.deliveries_per_message
    figures.delivered = sum(n for times, n in shown.items() if times >= 1)
    figures.duplicated = sum(n for times, n in shown.items() if times >= 2)
    # Answered ok but not stored as sent, or stored for an agent and never shown to it.
    figures.lost = sum("not stored as sent" in p or "never delivered" in p for p in problems)
    figures.acked_then_shown_again = sum("but shown again" in p for p in problems)
    figures.midturn_shown_own_round = len(ledger.midturn_own_round)
    figures.midturn_shown_beside_tool_results = len(ledger.midturn_beside_tool_results)
    figures.midturn_shown_only_beside_tool_results = len(
        ledger.midturn_beside_tool_results - ledger.midturn_own_round - ledger.woke_by
    )
    figures.reminders = tally.reminders
    figures.claude_processes = len(ledger.turns)


def _report(figures: Figures) -> None:
    log.warning("chaos production: %s", json.dumps(asdict(figures)))
    if target := os.environ.get("HIVE_CHAOS_REPORT"):
        with Path(target).open("a") as out:
            out.write(json.dumps(asdict(figures), indent=1) + "\n")
