"""The soak: agents, the operator and reminders busy while everything is ``kill -9``ed.

``hivectl serve`` and ``hivectl host`` run as processes on a temp home; the
agents' claude is the real CLI behind a wrapper that tags each API request
with the claude process it came from (pid and start time), answered by
:class:`~tests.chaos.soak_model.SoakModel`. The operator sends chains of
messages over ``run/host.sock`` the whole time, while a driver, at random
moments of a seeded schedule, ``kill -9``s the coordinator (and restarts
it), ``kill -9``s the agent host (and restarts it) and SIGKILLs a claude
that is mid-turn. Then the chaos stops, the hive settles, both processes
are stopped, and the checks run on the store, the model server's ledger and
the files. It runs on both stores (PostgreSQL with a slightly smaller plan
in CI: ``CI_PG_PLAN``).

Definitions the checks use:

- *answered ok*: the operator's ``send`` returned an id, or a tool result
  the model was shown said ``sent [msg #N]`` / ``reminder #R set``.
- *delivered*: a claude process of the recipient started with a wake prompt
  listing ``[msg #N]`` (its first API request, tagged with its pid and start
  time: pids wrap during a long soak on a busy machine).
- *acked*: ``messages.acked_at`` is set; *exactly once* means no claude
  process started after that moment was ever shown the message again
  (start times come from the wrapper, on the coordinator's clock).

Bounded by default (CI: a few minutes, fixed seed); ``HIVE_CHAOS_FULL=1``
runs the issue's full soak (20 agents, ≥ 20 kills of each kind);
``HIVE_CHAOS_SEED`` picks another seed; ``HIVE_CHAOS_REPORT=<file>`` writes
the run's counts there as JSON (``scripts/chaos`` prints them).
"""

from __future__ import annotations

import json
import logging
import os
import random
import subprocess
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from hyperhive.bash.records import TERMINAL, TaskTable
from hyperhive.bash.tasks import TASKS_SUBDIR
from hyperhive.client import call_once
from hyperhive.config import HivePaths
from hyperhive.errors import HiveError
from hyperhive.protocol import AgentView, OpAckReq, OpAgentsReq, OpInboxReq, OpSendReq
from tests.chaos.rig import (
    FULL,
    ChaosProcs,
    Spawn,
    chaos_wrapper,
    claude_starts,
    kill_group,
    kill_strays,
    live_claudes,
    seed_soak_home,
)
from tests.chaos.soak_model import TASK_ENDED, Ledger, SoakModel, task_wait
from tests.support.model_server import ModelServer
from tests.support.stores import HiveRows, read_hive, read_hive_sync
from tests.support.surfaces import until

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Plan:
    agents: int
    serve_kills: int
    host_kills: int
    claude_kills: int
    both_kills: int  # coordinator and host together (a machine-wide crash of the hive)
    gap: tuple[float, float]  # seconds between chaos actions
    operator_gap: tuple[float, float]  # seconds between operator sends
    settle_within: float
    timeout: float


CI_PLAN = Plan(4, 4, 3, 4, 1, (1.0, 3.0), (0.6, 1.6), 240, 540)
# PostgreSQL in CI: the same mix, a little smaller, to keep the suite's time in bounds.
CI_PG_PLAN = Plan(3, 3, 2, 3, 1, (1.0, 3.0), (0.6, 1.6), 240, 540)
FULL_PLAN = Plan(20, 22, 22, 24, 3, (2.0, 5.0), (0.5, 1.2), 1200, 3600)
PLAN = FULL_PLAN if FULL else CI_PLAN
PG_PLAN = FULL_PLAN if FULL else CI_PG_PLAN
SEED = int(os.environ.get("HIVE_CHAOS_SEED", "20261130"))

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(PLAN.timeout)]


@dataclass
class Tally:
    """What happened during the run (the report)."""

    seed: int = SEED
    mode: str = "full" if FULL else "ci"
    store: str = "sqlite"
    agents: int = 0
    serve_kills: int = 0
    host_kills: int = 0
    claude_kills: int = 0
    claude_kill_misses: int = 0
    operator_sends_ok: int = 0
    operator_sends_failed: int = 0
    operator_acks: int = 0
    messages: int = 0
    messages_to_agents: int = 0
    agent_sends_ok: int = 0
    reminders: int = 0
    bash_tasks: dict[str, int] = field(default_factory=dict)
    claude_processes: int = 0
    claude_pids_reused: int = 0  # pids two claudes had (why a claude is not named by pid)
    turns_finished: int = 0
    stalls: int = 0
    deliveries_per_message: dict[int, int] = field(default_factory=dict)
    chaos_seconds: float = 0.0
    settle_seconds: float = 0.0


class Operator:
    """The operator on ``run/host.sock``: sends chains, reads and acks its inbox."""

    def __init__(self, paths: HivePaths, agents: list[str], rng: random.Random, plan: Plan) -> None:
        self.paths = paths
        self.agents = agents
        self.rng = rng
        self.plan = plan
        self.confirmed: dict[int, tuple[str, str]] = {}
        self.failed = 0
        self.acks = 0
        self.acked_up_to = 0
        self.reappeared: list[int] = []  # acked, then listed as unread again

    async def run(self, stop: anyio.Event) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            to = self.rng.choice(self.agents)
            body = f"chain=o{n} hops={self.rng.randint(0, 3)}"
            try:
                got = await call_once(
                    self.paths.host_sock, OpSendReq(cmd="send", to=to, body=body), within=10
                )
                self.confirmed[got.id] = (to, body)
            except (HiveError, OSError):
                self.failed += 1  # the coordinator is down: this send was not answered ok
            if n % 7 == 0:
                await self._read_inbox()
            with anyio.move_on_after(self.rng.uniform(*self.plan.operator_gap)):
                await stop.wait()

    async def _read_inbox(self) -> None:
        try:
            inbox = await call_once(
                self.paths.host_sock, OpInboxReq(cmd="inbox", limit=50, unread_only=True), 10
            )
            ids = [m.id for m in inbox]
            self.reappeared += [i for i in ids if i <= self.acked_up_to]
            if ids:
                await call_once(self.paths.host_sock, OpAckReq(cmd="ack_until", up_to=max(ids)), 10)
                self.acked_up_to = max(self.acked_up_to, *ids)
                self.acks += 1
        except (HiveError, OSError):
            self.failed += 1


class Chaos:
    """The seeded schedule of kills; restarts follow each kill at once."""

    def __init__(self, procs: ChaosProcs, record: Path, rng: random.Random, plan: Plan) -> None:
        self.procs = procs
        self.record = record
        self.rng = rng
        self.plan = plan
        self.claude_kills = 0
        self.misses = 0

    def schedule(self) -> list[str]:
        plan = self.plan
        actions = (
            ["serve"] * plan.serve_kills
            + ["host"] * plan.host_kills
            + ["claude"] * plan.claude_kills
            + ["both"] * plan.both_kills
        )
        self.rng.shuffle(actions)
        return actions

    async def run(self) -> None:
        actions = self.schedule()
        retries = 0
        while actions:  # paced: the chaos schedule's random gaps
            action = actions.pop(0)
            await anyio.sleep(self.rng.uniform(*self.plan.gap))
            if action == "serve":
                await anyio.to_thread.run_sync(self.procs.kill9_serve)
                await anyio.to_thread.run_sync(self.procs.start_serve)
            elif action == "host":
                await anyio.to_thread.run_sync(self.procs.kill9_host)
                await anyio.to_thread.run_sync(self.procs.start_host)
            elif action == "both":
                await anyio.to_thread.run_sync(self.procs.kill9_host)
                await anyio.to_thread.run_sync(self.procs.kill9_serve)
                await anyio.to_thread.run_sync(self.procs.start_serve)
                await anyio.to_thread.run_sync(self.procs.start_host)
            elif not await self._kill_a_claude() and retries < 3 * self.plan.claude_kills:
                retries += 1
                actions.append("claude")  # no turn was running: try again later

    async def _kill_a_claude(self) -> bool:
        """SIGKILL a claude of the current host that is mid-turn (its group, as a crash)."""
        host = self.procs.host
        assert host is not None

        def killed_one() -> bool:
            live = live_claudes(self.record, self.procs.home)
            ours = [p for p in live if _ppid(p) == host.pid]
            return bool(ours) and kill_group(self.rng.choice(sorted(ours)))

        try:
            await until(killed_one, 10)
        except TimeoutError:  # no turn ran in the window: a miss, not a failure
            self.misses += 1
            return False
        self.claude_kills += 1
        return True


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def _task_tables(paths: HivePaths, agents: list[str]) -> dict[str, TaskTable]:
    out = {}
    for agent in agents:
        table = paths.agent_state(agent) / TASKS_SUBDIR / "tasks.json"
        try:
            out[agent] = TaskTable.model_validate_json(table.read_bytes())
        except FileNotFoundError:
            out[agent] = TaskTable()
    return out


def _unsettled(paths: HivePaths, agents: list[str], record: Path) -> list[str]:
    """Why the hive is not quiet yet (empty = settled)."""
    why = []
    rows = read_hive_sync(paths)
    unacked = sum(m.recipient != "operator" and not m.acked for m in rows.messages)
    unfired = sum(r.fired_at is None for r in rows.reminders)
    if unacked:
        why.append(f"{unacked} messages to agents unacked")
    if unfired:
        why.append(f"{unfired} reminders not fired")
    busy = [
        f"{a}/{t.id}:{t.status}"
        for a, table in _task_tables(paths, agents).items()
        for t in table.tasks
        if t.status not in TERMINAL
    ]
    if busy:
        why.append(f"bash tasks not ended: {busy[:10]}")
    if live := live_claudes(record, paths.home):
        why.append(f"{len(live)} claude processes running")
    return why


async def _settle(
    paths: HivePaths, agents: list[str], record: Path, procs: ChaosProcs, plan: Plan
) -> None:
    """Wait until nothing is pending, twice in a row a second apart."""
    deadline = time.monotonic() + plan.settle_within
    quiet = 0
    why: list[str] = []
    while quiet < 2:  # paced: settled means quiet twice in a row, a second apart
        if time.monotonic() > deadline:
            views = await agent_views(paths)
            raise AssertionError(
                f"the hive did not settle in {plan.settle_within:.0f}s: {why}\n"
                f"{_stuck_rows(paths, views)}\n{procs.logs()}"
            )
        why = await anyio.to_thread.run_sync(_unsettled, paths, agents, record)
        quiet = quiet + 1 if not why else 0
        await anyio.sleep(1.0 if not why else 0.5)


async def agent_views(paths: HivePaths) -> dict[str, AgentView]:
    """Each agent as ``hivectl agents list`` shows it (empty if the hive does not answer)."""
    try:
        views = await call_once(paths.host_sock, OpAgentsReq(cmd="agents"), 30)
    except (HiveError, OSError) as exc:
        log.warning("agents list unavailable: %s", exc)
        return {}
    return {v.name: v for v in views}


def describe(view: AgentView | None) -> str:
    """Why an agent may take no turn: its state and every hold the hive reports."""
    if view is None:
        return "(no state: the hive did not answer)"
    since = f" since {view.turn_state_since:.3f}" if view.turn_state_since else ""
    holds = {
        "running": view.running,
        "needs_login": view.needs_login,
        "broken": view.broken,
        "launch_problem": view.launch_problem,
        "over_budget": view.over_budget,
        "crashed": view.crashed,
        "lost_on": view.lost_on,
        "host": view.host,
    }
    return f"{view.turn_state}{since} " + " ".join(f"{k}={v!r}" for k, v in holds.items())


def _stuck_rows(paths: HivePaths, views: dict[str, AgentView]) -> str:
    stuck = [m for m in read_hive_sync(paths).messages if m.recipient != "operator" and not m.acked]
    rows = "; ".join(str((m.id, m.sender, m.recipient, m.body, m.delivered_at)) for m in stuck[:20])
    agents = sorted({m.recipient for m in stuck})
    states = "\n".join(f"  {a}: {describe(views.get(a))}" for a in agents)
    return f"unacked (not delivered yet, not lost): {rows}\nagents holding them:\n{states}"


def _check_messages(
    db: HiveRows,
    agents: list[str],
    operator: Operator,
    ledger: Ledger,
    spawned: dict[str, Spawn],
    tally: Tally,
) -> list[str]:
    problems: list[str] = []
    rows = db.message_map()
    tally.messages = len(rows)
    for msg_id, (to, body) in operator.confirmed.items():
        row = rows.get(msg_id)
        if row is None or (row.recipient, row.body) != (to, body):
            problems.append(f"operator send #{msg_id} answered ok but not stored as sent")
    for msg_id, (sender, to) in ledger.sent_ok.items():
        row = rows.get(msg_id)
        if row is None or (row.sender, row.recipient) != (sender, to):
            problems.append(f"{sender}'s send #{msg_id} answered ok but not stored as sent")
    problems += [f"operator's #{i} acked, then unread again" for i in operator.reappeared]
    reminder_ids = {r.id for r in db.reminders}
    problems += [f"reminder #{r} answered ok but lost" for r in ledger.reminders_ok - reminder_ids]

    deliveries: Counter[int] = Counter()
    for row in rows.values():
        if row.recipient not in agents:
            continue
        tally.messages_to_agents += 1
        shown = [t for t in ledger.turns_showing(row.id) if t.agent == row.recipient]
        deliveries[len(shown)] += 1
        if row.acked_at is None:
            # The settle waits for every ack: this is an agent that never got to it.
            problems.append(f"#{row.id} to {row.recipient} was never acked (not delivered yet)")
            continue
        acked_at = row.acked_at
        if not shown:
            problems.append(
                f"#{row.id} to {row.recipient} acked at {acked_at:.3f} but never shown to "
                f"a claude of {row.recipient}: lost"
            )
            continue
        late = [t.claude for t in shown if t.claude in spawned and spawned[t.claude].at > acked_at]
        if late:
            problems.append(f"#{row.id} acked at {acked_at:.3f} but shown again to claude {late}")
    tally.deliveries_per_message = dict(sorted(deliveries.items()))
    return problems


def _check_reminders(db: HiveRows, tally: Tally) -> list[str]:
    problems = []
    tally.reminders = len(db.reminders)
    fired_bodies = [m.body for m in db.messages if m.sender == "reminder"]
    for rid, fired_at in ((r.id, r.fired_at) for r in db.reminders):
        if fired_at is None:
            problems.append(f"reminder #{rid} never fired")
        elif not any(b.startswith(f"[reminder #{rid}]") for b in fired_bodies):
            problems.append(f"reminder #{rid} fired but no message reached the inbox")
    return problems


def _tasks_claude_got(paths: HivePaths, agents: list[str]) -> set[tuple[str, str]]:
    """(agent, task id) whose end a claude received in a tool's answer, by its transcripts.

    The model server only sees an answer in the request after it: a claude killed
    in between got it (and wrote it down) all the same.
    """
    got = set()
    for agent in agents:
        projects = paths.agent_home(agent) / ".claude" / "projects"
        for transcript in projects.glob("*/*.jsonl"):
            text = transcript.read_text(errors="replace")
            got |= {(agent, m.group(1)) for m in TASK_ENDED.finditer(text)}
    return got


def _check_tasks(
    db: HiveRows, paths: HivePaths, agents: list[str], ledger: Ledger, tally: Tally
) -> list[str]:
    problems = []
    answered = ledger.tasks_seen_ended | _tasks_claude_got(paths, agents)
    todos = {(t.agent, t.key): t.body for t in db.todos if t.subsystem == "bash"}
    statuses: Counter[str] = Counter()
    for agent, table in _task_tables(paths, agents).items():
        for task in table.tasks:
            statuses[task.status] += 1
            where = f"{agent}'s bash task {task.id} ({task.status})"
            if task.status not in TERMINAL:
                problems.append(f"{where} never ended")
                continue
            todo = todos.get((agent, task.id))
            if todo is None:
                # Only a run (or status) whose answer showed the end clears, or never
                # files, the todo; the model never clears one itself.
                if (agent, task.id) not in answered:
                    took = (task.ended_at or 0.0) - task.created_at
                    problems.append(
                        f"{where} has no todo, and no claude was shown its end "
                        f"(ended {took:.1f}s after run, which waited {task_wait(task.cmd)}s; "
                        f"todo_synced={task.todo_synced}, error={task.error!r})"
                    )
            elif not todo.startswith(f"bash task {task.id} {task.status}"):
                problems.append(f"{where}: its todo is stale: {todo.splitlines()[0]!r}")
    tally.bash_tasks = dict(statuses)
    return problems


def _git(meta: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", str(meta), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def check_store(paths: HivePaths) -> list[str]:
    """The store sound (hive.db's integrity check on SQLite), the meta repo whole,
    committed, and a true mirror of the store's tree and applied configs."""
    problems = []
    hive = read_hive_sync(paths)
    if hive.integrity is not None and hive.integrity != "ok":
        problems.append(f"hive.db integrity_check: {hive.integrity}")
    try:
        if (mirrored := json.loads(paths.topology.read_text())) != hive.topology:
            problems.append(f"topology.json {mirrored} is not the store's {hive.topology}")
    except (OSError, ValueError) as exc:
        problems.append(f"topology.json unreadable: {exc}")
    folder = paths.meta / "agents"
    files = {p.stem: p.read_text() for p in folder.glob("*.toml")} if folder.is_dir() else {}
    if files != hive.configs:
        problems.append(f"meta/agents differs from the store's configs: {sorted(files)}")
    fsck = _git(paths.meta, "fsck", "--full", "--strict")
    if fsck.returncode != 0 or any(
        word in fsck.stdout + fsck.stderr for word in ("error", "missing", "broken", "corrupt")
    ):
        problems.append(f"git fsck of the meta repo: {fsck.stdout}{fsck.stderr}")
    status = _git(paths.meta, "--no-optional-locks", "status", "--porcelain")
    if status.returncode != 0 or status.stdout.strip():
        problems.append(f"meta repo not clean: {status.stdout}{status.stderr}")
    if (paths.meta / ".git" / "index.lock").exists():
        problems.append("meta repo: a stale .git/index.lock was left behind")
    if _git(paths.meta, "log", "--oneline", "-1").returncode != 0:
        problems.append("meta repo: HEAD has no readable commit")
    return problems


def _post_mortem(
    target: Path, ledger: Ledger, spawned: dict[str, Spawn], views: dict[str, AgentView]
) -> None:
    """What the checks read besides hive.db, kept beside it for a failed run's reader."""
    target.write_text(
        json.dumps(
            {
                "turns": [asdict(t) for t in ledger.turns.values()],
                "spawned": {k: s.at for k, s in spawned.items()},
                "tasks_seen_ended": sorted(ledger.tasks_seen_ended),
                "agents_after_settle": {a: v.model_dump(mode="json") for a, v in views.items()},
            },
            indent=1,
        )
    )


def _report(tally: Tally) -> None:
    log.warning("chaos soak: %s", json.dumps(asdict(tally)))
    if target := os.environ.get("HIVE_CHAOS_REPORT"):
        with Path(target).open("a") as out:  # beside the other chaos runs' figures
            out.write(json.dumps(asdict(tally), indent=1) + "\n")


async def test_nothing_acknowledged_is_lost_under_kill_9(
    tmp_path: Path, claude_bin: Path, hive_store_url: str | None
) -> None:
    plan = PLAN if hive_store_url is None else PG_PLAN
    rng = random.Random(SEED)
    agents = [f"a{i:02d}" for i in range(plan.agents)]
    record = tmp_path / "claude-starts"
    model = SoakModel(agents, SEED)
    tally = Tally(agents=len(agents), store="sqlite" if hive_store_url is None else "postgresql")
    home = tmp_path / "hive"
    home.mkdir()
    paths = HivePaths(home)
    procs = ChaosProcs(home)
    try:
        async with ModelServer(model) as server:
            claude = chaos_wrapper(tmp_path, claude_bin, record)
            seed_soak_home(home, agents, server.url, claude, hive_store_url)
            await anyio.to_thread.run_sync(procs.start)
            operator = Operator(paths, agents, random.Random(rng.random()), plan)
            chaos = Chaos(procs, record, random.Random(rng.random()), plan)
            started = time.monotonic()
            async with anyio.create_task_group() as tg:
                stop = anyio.Event()
                tg.start_soon(operator.run, stop)
                await chaos.run()
                stop.set()
            tally.chaos_seconds = round(time.monotonic() - started, 1)
            started = time.monotonic()
            await _settle(paths, agents, record, procs, plan)
            tally.settle_seconds = round(time.monotonic() - started, 1)
            views = await agent_views(paths)
            host_code, serve_code = await anyio.to_thread.run_sync(procs.stop_gracefully)
            assert (host_code, serve_code) == (0, 0), procs.logs()
    finally:
        procs.close()
        kill_strays(record, home)

    with model.lock:
        ledger = model.ledger
    tally.serve_kills = procs.serve_kills
    tally.host_kills = procs.host_kills
    tally.claude_kills = chaos.claude_kills
    tally.claude_kill_misses = chaos.misses
    tally.operator_sends_ok = len(operator.confirmed)
    tally.operator_sends_failed = operator.failed
    tally.operator_acks = operator.acks
    tally.agent_sends_ok = len(ledger.sent_ok)
    tally.claude_processes = len(ledger.turns)
    tally.turns_finished = sum(t.finished for t in ledger.turns.values())
    tally.stalls = ledger.stalls
    spawned = claude_starts(record)
    tally.claude_pids_reused = sum(n > 1 for n in Counter(s.pid for s in spawned.values()).values())
    _post_mortem(tmp_path / "post-mortem.json", ledger, spawned, views)
    db = await read_hive(paths)
    problems = _check_messages(db, agents, operator, ledger, spawned, tally)
    problems += _check_reminders(db, tally)
    problems += _check_tasks(db, paths, agents, ledger, tally)
    problems += check_store(paths)
    _report(tally)

    assert ledger.untagged == 0, "some API requests carried no claude pid"
    assert procs.serve_kills >= plan.serve_kills + plan.both_kills
    assert procs.host_kills >= plan.host_kills + plan.both_kills
    assert chaos.claude_kills >= plan.claude_kills // 2, "too few turns were caught mid-turn"
    assert tally.operator_sends_ok > 0 and tally.reminders > 0 and tally.bash_tasks
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:60])
