"""The hostile suite's hive: one attacker (``mallory``), its relatives, and snapshots.

The tree every suite here starts from::

    boss (root, every group)          stranger (root)        benign (root)
    ├── mallory  ← the attacker       └── outsider
    │   └── minion
    └── victim

``mallory`` holds messaging, meta, inbox, lifecycle, approvals and scheduling,
and lacks diagnostics, execution, web_tools and forge: each refusal is then
either the topology's or the group gate's, never an accident of a missing
group. :func:`plant` gives the other agents rows worth stealing (mail,
reminders, a question, a todo, approvals, schedules, status, notes), and
:func:`snapshot` captures everything that is not the attacker's own, so a
test can prove an attempt changed nothing.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import pwd
import subprocess
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.agent.host import AgentHost
from hyperhive.client import RpcClient, connect
from hyperhive.config import AgentConfig, HivePaths
from hyperhive.core.coordinator import Coordinator
from hyperhive.errors import HiveError
from hyperhive.permissions import ToolGroup
from hyperhive.sysusers import agent_user
from tests.support.hive import (
    agent_call,
    agent_env,
    coordinator,
    hive_config,
    op_call,
    operator,
    seed_home,
)
from tests.support.model_server import ModelServer
from tests.support.repos import seeded
from tests.support.stores import read_hive_sync
from tests.support.surfaces import until

__all__ = [
    "ACTIVE",
    "ATTACKER",
    "MALLORY_GROUPS",
    "TOPOLOGY",
    "Planted",
    "assert_unchanged",
    "configs",
    "live_hive",
    "percentile",
    "plant",
    "refusal",
    "report",
    "seed",
    "snapshot",
]

ATTACKER = "mallory"
TOPOLOGY: dict[str, str | None] = {
    "boss": None,
    "mallory": "boss",
    "minion": "mallory",
    "victim": "boss",
    "stranger": None,
    "outsider": "stranger",
    "benign": None,
}
MALLORY_GROUPS = (
    ToolGroup.MESSAGING,
    ToolGroup.META,
    ToolGroup.INBOX,
    ToolGroup.LIFECYCLE,
    ToolGroup.APPROVALS,
    ToolGroup.SCHEDULING,
)
NEVER_FIRES = "0 0 1 1 *"  # a yearly cron: a schedule that will not fire mid-test


def configs(
    env: Mapping[str, str] | None = None, attacker: Iterable[ToolGroup] = MALLORY_GROUPS
) -> dict[str, AgentConfig]:
    manager = list(ToolGroup.MANAGER_DEFAULT)
    groups: dict[str, list[ToolGroup]] = {
        "boss": manager,
        "mallory": list(attacker),
        "minion": list(ToolGroup.AGENT_DEFAULT),
        "victim": list(ToolGroup.AGENT_DEFAULT),
        "stranger": manager,
        "outsider": list(ToolGroup.AGENT_DEFAULT),
        "benign": list(ToolGroup.AGENT_DEFAULT),
    }
    return {name: AgentConfig(tool_groups=g, env=dict(env or {})) for name, g in groups.items()}


def seed(
    home: Path,
    env: Mapping[str, str] | None = None,
    hive_toml: str = "",
    attacker: Iterable[ToolGroup] = MALLORY_GROUPS,
) -> HivePaths:
    return seed_home(home, configs(env, attacker), TOPOLOGY, hive_toml)


@dataclass(frozen=True)
class Planted:
    """Row ids of other agents' loose ends, for the attacker to go after."""

    victim_mail: tuple[int, ...]
    victim_reminder: int
    boss_reminder: int
    victim_question: int
    victim_todo: int
    boss_approval: int
    stranger_approval: int
    boss_schedule_on_victim: int
    boss_schedule_on_mallory: int


def _id(value: Any, key: str = "id") -> int:
    assert isinstance(value, dict), value
    return int(value[key])


async def plant(c: Coordinator) -> Planted:
    paths = c.paths
    async with (
        operator(paths) as op,
        connect(paths.agent_sock("boss")) as boss,
        connect(paths.agent_sock("victim")) as victim,
        connect(paths.agent_sock("stranger")) as stranger,
    ):
        mail = (
            _id(await op_call(op, "send", to="victim", body="operator: for victim's eyes only")),
            _id(await agent_call(boss, "send", to="victim", body="boss: the launch code is 0000")),
        )
        v_rem = _id(await agent_call(victim, "remind", message="victim's", delay_seconds=3600))
        b_rem = _id(await agent_call(boss, "remind", message="boss's", delay_seconds=3600))
        question = await agent_call(victim, "ask_operator", question="may I?")
        todo = await c.loose_ends.todo_upsert("victim", "forge", "pr-1", "review PR 1")
        b_app = await agent_call(boss, "request_init_config", name="newkid")
        s_app = await agent_call(stranger, "request_init_config", name="strangekid")
        on_victim = await agent_call(
            boss, "schedule_prompt", target="victim", prompt="standup", cron=NEVER_FIRES
        )
        on_mallory = await agent_call(
            boss, "schedule_prompt", target="mallory", prompt="report in", cron=NEVER_FIRES
        )
        await agent_call(victim, "set_status", text="victim at work")
    notes = paths.agent_state("victim") / "notes.md"
    notes.parent.mkdir(parents=True, exist_ok=True)
    notes.write_text("victim's private notes\n")
    return Planted(
        victim_mail=mail,
        victim_reminder=v_rem,
        boss_reminder=b_rem,
        victim_question=_id(question, "question_id"),
        victim_todo=todo,
        boss_approval=_id(b_app, "approval_id"),
        stranger_approval=_id(s_app, "approval_id"),
        boss_schedule_on_victim=_id(on_victim),
        boss_schedule_on_mallory=_id(on_mallory),
    )


# ---- a live hive: coordinator (with dashboard) + agent host ----------------------------

ACTIVE = (ATTACKER, "benign")
"""The agents the host runs in a live hive; the rest are stopped so their rows hold still."""


def _give(paths: HivePaths, path: Path, agent: str) -> None:
    try:
        entry = pwd.getpwnam(agent_user(paths, agent))
    except KeyError:
        return  # unsandboxed: no per-agent users
    for p in (path.parent, path):
        os.chown(p, entry.pw_uid, entry.pw_gid)
    path.chmod(0o600)


@asynccontextmanager
async def live_hive(
    home: Path,
    claude_bin: Path,
    model: ModelServer,
    attacker: Iterable[ToolGroup] = MALLORY_GROUPS,
    runtime: str = "unsandboxed",
) -> AsyncIterator[tuple[Coordinator, AgentHost]]:
    """The hive with rows planted, only :data:`ACTIVE` running, every harness attached."""
    seed(
        home,
        env=agent_env(model.url),
        hive_toml=f'runtime = "{runtime}"\ndashboard_port = 0\nclaude_bin = "{claude_bin}"\n',
        attacker=attacker,
    )
    async with coordinator(home) as c:
        await plant(c)
        async with operator(c.paths) as op:
            for name in TOPOLOGY:
                if name not in ACTIVE:
                    await op_call(op, "agent_kill", agent=name)
    _give(HivePaths(home), HivePaths(home).agent_state("victim") / "notes.md", "victim")

    paths = HivePaths(home)
    hive = hive_config(home)
    coord = await Coordinator.open(paths, hive)
    host = AgentHost(paths, hive, host_id="sec-host")
    async with anyio.create_task_group() as tg:
        await tg.start(functools.partial(coord.run, dashboard=True))
        await tg.start(host.run)
        try:
            await until(lambda: set(ACTIVE) <= set(host.agents))
            for name in ACTIVE:
                await _attached(coord, name)
            # The host seeds every config repo after it registers (#14): done before a
            # test snapshots the files, or the seeding would look like the attack's work.
            await until(lambda: all(seeded(paths.agent_config_repo(a)) for a in TOPOLOGY), 60)
            yield coord, host
        finally:
            with anyio.move_on_after(10):
                await host.stop_all(graceful=False)
            tg.cancel_scope.cancel()


async def _attached(c: Coordinator, name: str) -> None:
    """The harness has attached (and so finished its start-up writes)."""
    with anyio.fail_after(30):
        while True:
            if (await c.store.agents.get(name)).incarnation >= 1:
                return
            event = c.notifier.event(name)
            with anyio.move_on_after(0.2):
                await event.wait()


# ---- snapshots -----------------------------------------------------------------------


def db_rows(paths: HivePaths, mine: Iterable[str] = (ATTACKER,)) -> dict[str, list[Any]]:
    """Every stored row that does not belong to one of ``mine``, read through the store."""
    skip = set(mine)
    hive = read_hive_sync(paths)
    return {
        "agent_state": [a for a in hive.agents if a.name not in skip],
        "reminders": [r for r in hive.reminders if r.agent not in skip],
        "todos": [t for t in hive.todos if t.agent not in skip],
        "approvals": [a for a in hive.approvals if a.requester not in skip],
        "questions": [q for q in hive.questions if q.asker not in skip],
        "schedules": [s for s in hive.schedules if s.owner not in skip],
        "messages": [m for m in hive.messages if m.sender not in skip and m.recipient not in skip],
    }


def _tree_digest(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _meta_head(paths: HivePaths) -> str:
    done = subprocess.run(
        ["git", "-C", str(paths.meta), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip()


def snapshot(
    paths: HivePaths, mine: Iterable[str] = (ATTACKER,), files_of: Iterable[str] | None = None
) -> dict[str, Any]:
    """hive.db rows, topology.json, meta HEAD and the files of every agent but ``mine``."""
    skip = set(mine)
    agents = [a for a in (files_of if files_of is not None else TOPOLOGY) if a not in skip]
    return {
        "db": db_rows(paths, skip),
        "topology": json.loads(paths.topology.read_text()),
        "meta_head": _meta_head(paths),
        "applied": {f.name: f.read_text() for f in sorted((paths.meta / "agents").iterdir())},
        "files": {a: _tree_digest(paths.agent_dir(a)) for a in agents},
    }


def assert_unchanged(before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
    changed = [k for k in before if before[k] != after[k]]
    detail = {k: {"before": before[k], "after": after[k]} for k in changed}
    assert not changed, f"the attack changed {changed}: {json.dumps(detail, default=str)[:3000]}"


# ---- refusals ------------------------------------------------------------------------


async def refusal(client: RpcClient, frame: dict[str, Any]) -> HiveError | None:
    """The error an agent-socket request drew (None: it was accepted)."""
    try:
        await client.call_json(frame)
    except HiveError as exc:
        return exc
    return None


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def report(request: pytest.FixtureRequest, key: str, value: Any, line: str) -> None:
    """Show a measured figure on the terminal and keep it in pytest's cache (no print)."""
    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    if cache is not None:
        cache.set(f"hyperhive/security/{key}", value)
    request.node.user_properties.append((key, value))
    plugins = request.config.pluginmanager
    reporter = plugins.get_plugin("terminalreporter")
    capture = plugins.get_plugin("capturemanager")
    if reporter is None:
        return
    if capture is None:
        reporter.write_line(f"[security] {line}")
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(f"[security] {line}")
