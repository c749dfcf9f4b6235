"""Turn-economy scenarios on the real claude CLI: one home for the e2e tests and the bench.

Each scenario seeds a hive, scripts what a diligent model answers for each
agent (one scripted answer per model request the scenario needs: that is
its minimum), drives it from the operator socket, and waits until every
script is used up and every agent is idle again. Then a probe message wakes
each agent once more: a wake left over from the scenario ("Your todos
changed" with nothing to find) lands no later than the probe, because a
harness waits again only after its turn ends. The requests before the
probes are the scenario's cost; a wake for nothing shows as a turn beyond
the minimum (it gets the fallback answer, not a scripted one).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from hyperhive.config import AgentConfig, HivePaths, dump_agent_config
from hyperhive.permissions import ToolGroup
from tests.support.hive import agent_env, op_call, operator, running_hive, seed_home
from tests.support.model_server import Answer, ModelServer, RecordedRequest, text, tool_call
from tests.support.surfaces import until

__all__ = [
    "PROBE",
    "SUBAGENT",
    "SUBAGENT_GOAL",
    "SCENARIOS",
    "Run",
    "Scenario",
    "agent_of",
    "run_scenario",
    "said",
    "starts_turn",
]

PROBE = "probe: anything left over?"
GOAL = "mcp__subagent_control__goal_reached"
# A subagent's requests (offered the control surface's tools) are scripted under this key.
SUBAGENT = "(subagent)"
MANAGER = AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))
_WHO = re.compile(r"You are ([a-z0-9][a-z0-9-]*), an agent of a hyperhive")


def said(request: RecordedRequest) -> str:
    """The conversation a request carries (wake prompts, tool calls and results)."""
    return json.dumps(request.messages)


def agent_of(body: Any) -> str | None:
    """Whose claude sent a request: our system prompt names it (in the system blocks,
    or in a reminder inside the first user message); :data:`SUBAGENT` for a subagent's."""
    tools = body.get("tools") if isinstance(body, dict) else None
    if any(t.get("name") == GOAL for t in tools or []):
        return SUBAGENT
    found = _WHO.search(json.dumps(body))
    return found.group(1) if found else None


def starts_turn(request: RecordedRequest) -> bool:
    """The first request of a turn ends on the wake prompt, not on a tool result."""
    users = [m for m in request.messages if m.get("role") == "user"]
    return bool(users) and '"tool_result"' not in json.dumps(users[-1])


class _Scripts:
    """Each agent's scripted answers, in order; anything unscripted gets ``fallback``."""

    def __init__(self, scripts: Mapping[str, Sequence[Answer]], fallback: Answer) -> None:
        self._left = {agent: list(answers) for agent, answers in scripts.items()}
        self._fallback = fallback
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Answer:
        agent = agent_of(body)
        with self._lock:
            left = self._left.get(agent or "")
            return left.pop(0) if left else self._fallback

    def left(self, agent: str | None = None) -> int:
        with self._lock:
            if agent is not None:
                return len(self._left.get(agent, ()))
            return sum(len(a) for a in self._left.values())


@dataclass
class Run:
    """A scenario's hive while it runs, and what the model saw."""

    scenario: Scenario
    home: Path
    coord: Any
    host: Any
    model: ModelServer
    scripts: _Scripts
    requests: list[RecordedRequest] = field(default_factory=list)

    @property
    def paths(self) -> HivePaths:
        return HivePaths(self.home)

    async def op(self, cmd: str, **fields: Any) -> Any:
        async with operator(self.paths) as op:
            return await op_call(op, cmd, **fields)

    async def scripts_left(self, n: int, agent: str | None = None, within: float = 60) -> None:
        """Wait until only ``n`` scripted answers (of ``agent``, or all) are left."""
        await until(lambda: self.scripts.left(agent) <= n, within)

    def turns(self, agent: str | None = None) -> int:
        return sum(
            1
            for r in self.requests
            if starts_turn(r) and (agent is None or agent_of(r.body) == agent)
        )

    def at_minimum(self) -> bool:
        """Exactly the requests and turns the scenario needs: no wake for nothing."""
        wanted = (self.scenario.min_requests, self.scenario.min_turns)
        return (len(self.requests), self.turns()) == wanted

    def requests_of(self, agent: str) -> list[RecordedRequest]:
        return [r for r in self.requests if agent_of(r.body) == agent]


Drive = Callable[[Run], Awaitable[None]]


@dataclass(frozen=True)
class Scenario:
    """``scripts``: each agent's answers, one per request the scenario needs."""

    name: str
    agents: Mapping[str, AgentConfig]
    scripts: Mapping[str, Sequence[Answer]]
    min_turns: int
    drive: Drive
    topology: Mapping[str, str | None] | None = None

    @property
    def min_requests(self) -> int:
        return sum(len(s) for s in self.scripts.values())


async def _idle(run: Run) -> None:
    def idle() -> bool:
        rts = run.host.agents
        return all(a in rts and rts[a].bus.turn_state == "idle" for a in _everyone(run))

    await until(idle, 60)


def _everyone(run: Run) -> list[str]:
    """The scenario's agents (a subagent is its parent's, not one of them)."""
    return sorted((set(run.scenario.agents) | set(run.scenario.scripts)) - {SUBAGENT})


@asynccontextmanager
async def run_scenario(
    scenario: Scenario, home: Path, model: ModelServer, claude_bin: Path, hive_toml: str = ""
) -> AsyncIterator[Run]:
    """Run ``scenario`` to its end and probe every agent; the hive stays up in the block.
    ``hive_toml``: settings of the scenario's hive (``settle_seconds = 0``, say)."""
    scripts = _Scripts(scenario.scripts, text("noted"))
    model.set_script(scripts)
    env = agent_env(model.url)
    configs = {
        n: c.model_copy(update={"env": {**c.env, **env}}) for n, c in scenario.agents.items()
    }
    seed_home(home, configs, scenario.topology, hive_toml=hive_toml)
    async with running_hive(home, claude_bin) as (coord, host):
        await until(lambda: set(scenario.agents) <= set(host.agents))
        run = Run(scenario, home, coord, host, model, scripts)
        await scenario.drive(run)
        await run.scripts_left(0)
        await _idle(run)
        before = len(model.requests)
        for agent in _everyone(run):
            await run.op("send", to=agent, body=PROBE)
        probed = await anyio.to_thread.run_sync(
            lambda: model.wait_for(
                lambda reqs: (
                    {agent_of(r.body) for r in reqs[before:] if PROBE in said(r)}
                    >= set(_everyone(run))
                ),
                60,
            )
        )
        run.requests = [r for r in probed if r.main and PROBE not in said(r)]
        yield run


# ---- the scenarios -----------------------------------------------------------------


async def _tell(run: Run, agent: str, body: str) -> None:
    await run.op("send", to=agent, body=body)


async def _bash_inline(run: Run) -> None:
    await _tell(run, "alice", "run the inline task")


async def _bash_later(run: Run) -> None:
    await _tell(run, "alice", "start the long task")
    await run.scripts_left(1, "alice")  # the turn that started it is over
    await _idle(run)
    (run.home / "gate").touch()


async def _reminder(run: Run) -> None:
    await _tell(run, "alice", "remind yourself")


async def _child(run: Run) -> None:
    await _tell(run, "queen", "spawn a worker and give it its task")

    async def pending() -> list[Any]:
        rows = await run.op("approvals")
        return rows if isinstance(rows, list) else []

    with anyio.fail_after(60):
        while True:
            rows = await pending()
            if rows:
                break
            await anyio.sleep(0.05)
    await run.op("approve", approval_id=rows[0]["id"])


async def _subagent(run: Run) -> None:
    await _tell(run, "alice", "delegate the search")


async def _reparent(run: Run) -> None:
    await run.op("set_parent", child="kid", new_parent="p2")
    await _tell(run, "kid", "report to your parent")


def _later_cmd(home: Path) -> str:
    gate = home / "gate"
    return f"while [ ! -e {gate} ]; do sleep 0.05; done; echo finished-late"


def bash_later(home: Path) -> Scenario:
    """A task that outlives its turn: its completion wakes exactly one more turn."""
    run = tool_call("mcp__bash__run", {"cmd": _later_cmd(home), "wait_seconds": 0})
    return Scenario(
        "bash task ends later",
        {"alice": AgentConfig()},
        {"alice": [run, text("started"), text("read the result")]},
        2,
        _bash_later,
    )


BASH_INLINE = Scenario(
    "bash task ends inline",
    {"alice": AgentConfig()},
    {
        "alice": [
            tool_call("mcp__bash__run", {"cmd": "echo inline-result", "wait_seconds": 20}),
            text("ok"),
        ]
    },
    1,
    _bash_inline,
)

REMINDER = Scenario(
    "reminder",
    {"alice": AgentConfig()},
    {
        "alice": [
            tool_call("mcp__hyperhive__remind", {"message": "look again", "delay_seconds": 1}),
            text("reminder set"),
            text("looked again"),
        ]
    },
    2,
    _reminder,
)


SUBAGENT_GOAL = Scenario(
    "subagent reaches its goal",
    {"alice": AgentConfig()},
    {
        "alice": [
            tool_call("mcp__subagent__start", {"prompt": "find the answer", "name": "scout"}),
            text("delegated"),
            text("the answer is 42"),  # woken once, the summary in the wake: nothing to fetch
        ],
        SUBAGENT: [tool_call(GOAL, {"summary": "found the answer: 42"}), text("done")],
    },
    3,
    _subagent,
)


def _worker_toml(model_url: str) -> str:
    return dump_agent_config(
        AgentConfig(tool_groups=[ToolGroup.MESSAGING], env=agent_env(model_url))
    )


def child_spawned(model_url: str) -> Scenario:
    """A manager asks for a child, the operator approves, the manager sends its task."""
    return Scenario(
        "child spawned, approved, tasked",
        {"queen": MANAGER},
        {
            "queen": [
                tool_call(
                    "mcp__hyperhive__request_init_config",
                    {"name": "worker", "config": _worker_toml(model_url)},
                ),
                text("asked"),
                tool_call("mcp__hyperhive__send", {"to": "worker", "body": "do the thing"}),
                text("tasked"),
            ],
            "worker": [text("doing the thing")],
        },
        3,
        _child,
    )


REPARENT = Scenario(
    "reparent",
    {"p1": MANAGER, "p2": MANAGER, "kid": AgentConfig()},
    {
        "kid": [
            tool_call("mcp__hyperhive__send", {"to": "<parent>", "body": "hello new parent"}),
            text("reported"),
        ],
        "p2": [text("kid reported")],
    },
    2,
    _reparent,
    topology={"p1": None, "p2": None, "kid": "p1"},
)

# By name; built per run: some need the run's home (a gate file) or the model's URL.
SCENARIOS: Mapping[str, Callable[[Path, str], Scenario]] = {
    BASH_INLINE.name: lambda home, url: BASH_INLINE,
    "bash task ends later": lambda home, url: bash_later(home),
    REMINDER.name: lambda home, url: REMINDER,
    SUBAGENT_GOAL.name: lambda home, url: SUBAGENT_GOAL,
    "child spawned, approved, tasked": lambda home, url: child_spawned(url),
    REPARENT.name: lambda home, url: REPARENT,
}
