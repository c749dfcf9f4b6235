"""The flush turn of a graceful stop: the real claude CLI against the scripted model.

A stop that finds an agent idle gives it one short turn to save what it needs
(spec 002: the fenced ``recv`` "directs the agent to flush durable state"); a
busy agent's own turn is its last; ``flush_on_stop = false`` stops it with no
turn; an agent that never had a session has nothing to save; the stop's grace
cuts a flush that does not end.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.agent.active import ActiveAgent
from hyperhive.config import AgentConfig, HivePaths
from hyperhive.store.rows import SpendEntry
from tests.support.hive import agent_env, op_call, operator, running_hive, seed_home
from tests.support.model_server import (
    Answer,
    ModelServer,
    RecordedRequest,
    Stall,
    Usage,
    text,
    tool_call,
)
from tests.support.surfaces import until, until_async

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(240)]

SONNET = "claude-sonnet-4-5-20250929"
CALL = Usage(input_tokens=50_800, output_tokens=5)
CALL_USD = (CALL.input_tokens * 3 + CALL.output_tokens * 15) / 1e6
FLUSH_WORDS = "The hive is stopping you gracefully"
NOTE = "flushed: the open work is the report for bob"


def _last_user(body: dict[str, Any]) -> str:
    users = [m for m in body["messages"] if m.get("role") == "user"]
    return json.dumps(users[-1]) if users else ""


def _flushes(requests: list[RecordedRequest], agent: str) -> list[RecordedRequest]:
    """The requests that started an agent's flush turn."""
    return [
        r
        for r in requests
        if r.main
        and FLUSH_WORDS in _last_user(r.body)
        and f"You are {agent}," in json.dumps(r.body)
    ]


def _turn_starts(rt: ActiveAgent) -> int:
    return sum(1 for e in rt.bus.history if e["kind"] == "turn_start")


class _Diligent:
    """A diligent model: the flush prompt gets a ``Write`` of the agent's note (to the
    path the prompt names), a tool result gets "saved", anything else "noted"."""

    def __init__(self, paths: HivePaths) -> None:
        self.paths = paths
        self.stall_flush: Stall | None = None

    def __call__(self, body: dict[str, Any]) -> Answer:
        last = _last_user(body)
        if '"tool_result"' in last:
            return text("saved", CALL)
        if FLUSH_WORDS in last:
            if self.stall_flush is not None:
                return self.stall_flush
            who = next(a for a in ("alice", "carol") if f"You are {a}," in json.dumps(body))
            note = self.paths.agent_state(who) / "notes.md"
            return tool_call("Write", {"file_path": str(note), "content": NOTE}, CALL)
        return text("noted", CALL)


def _seed(home: Path, model_server: ModelServer, **agents: AgentConfig) -> _Diligent:
    seeded = {
        name: cfg.model_copy(update={"env": agent_env(model_server.url), "model": SONNET})
        for name, cfg in agents.items()
    }
    paths = seed_home(home, seeded)
    script = _Diligent(paths)
    model_server.set_script(script)
    return script


async def _runs(c: Any, agent: str, n: int) -> list[SpendEntry]:
    """``agent``'s counted runs, oldest first, once there are ``n``."""

    async def counted() -> list[SpendEntry]:
        rows = await c.store.spend.entries(agent, limit=100)
        return rows[::-1] if len(rows) >= n else []

    found: list[SpendEntry] = await until_async(counted, within=120)
    return found


async def _a_turn(c: Any, agent: str, runs_before: int) -> None:
    async with operator(c.paths) as op:
        await op_call(op, "send", to=agent, body="hello")
    await _runs(c, agent, runs_before + 1)


async def test_a_stop_gives_each_idle_agent_with_a_session_one_flush_turn(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    _seed(tmp_path, model_server, alice=AgentConfig(), carol=AgentConfig(), bob=AgentConfig())
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: {"alice", "bob", "carol"} <= set(host.agents))
        rts = dict(host.agents)
        await _a_turn(c, "alice", 0)
        await _a_turn(c, "carol", 0)
        await until(lambda: rts["alice"].bus.turn_state == "idle")
        # `hivectl agents kill`: alice, idle, gets her flush turn and writes her note.
        async with operator(c.paths) as op:
            await op_call(op, "agent_kill", agent="alice")
        with anyio.fail_after(120):
            await rts["alice"].lifetime.done.wait()
        # The hive going down (what `hivectl up` does on SIGTERM): carol flushes; bob,
        # who never had a session, has nothing in context to save and takes no turn.
        await host.stop_all()
        alice_runs = await _runs(c, "alice", 2)
        carol_runs = await _runs(c, "carol", 2)
        bob_runs = await c.store.spend.entries("bob", limit=10)

    requests = model_server.requests
    assert len(_flushes(requests, "alice")) == 1 and len(_flushes(requests, "carol")) == 1
    assert not [r for r in requests if "You are bob," in json.dumps(r.body)]
    assert bob_runs == []
    for agent, runs in (("alice", alice_runs), ("carol", carol_runs)):
        state = HivePaths(tmp_path).agent_state(agent)
        assert (state / "notes.md").read_text() == NOTE
        # The flush prompt names where the notes go: the agent's own state dir.
        [flush] = _flushes(requests, agent)
        assert str(state) in _last_user(flush.body)
        # Counted like any turn, on the same session: its greeting (one call), then the
        # flush (the Write, then the answer to its result).
        assert [r.kind for r in runs] == ["turn", "turn"]
        assert [r.cost_usd for r in runs] == pytest.approx([CALL_USD, 2 * CALL_USD], rel=1e-9)
        assert runs[0].session_id == runs[1].session_id is not None
        assert runs[1].session_usd == pytest.approx(3 * CALL_USD, rel=1e-9)
        assert _turn_starts(rts[agent]) == 2
    assert _turn_starts(rts["bob"]) == 0


async def test_flush_on_stop_false_stops_an_idle_agent_with_no_turn(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    _seed(tmp_path, model_server, alice=AgentConfig(flush_on_stop=False))
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        rt = host.agents["alice"]
        await _a_turn(c, "alice", 0)
        await until(lambda: rt.bus.turn_state == "idle")
        before = len(model_server.requests)
        async with operator(c.paths) as op:
            await op_call(op, "agent_kill", agent="alice")
        with anyio.fail_after(60):
            await rt.lifetime.done.wait()
        runs = await c.store.spend.entries("alice", limit=10)
    assert len(model_server.requests) == before
    assert _turn_starts(rt) == 1 and len(runs) == 1
    assert not (HivePaths(tmp_path).agent_state("alice") / "notes.md").exists()


async def test_a_busy_agent_stopped_mid_turn_takes_exactly_its_own_turn(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    release = threading.Event()
    stalled = Stall(release, text("finished", CALL))
    script = _Diligent(HivePaths(tmp_path))
    model_server.set_script(
        lambda body: stalled if "work now" in _last_user(body) else script(body)
    )
    seed_home(
        tmp_path,
        {"alice": AgentConfig(env=agent_env(model_server.url), model=SONNET)},
    )
    try:
        async with running_hive(tmp_path, claude_bin) as (c, host):
            await until(lambda: "alice" in host.agents)
            rt = host.agents["alice"]
            await _a_turn(c, "alice", 0)  # a session: an idle stop would flush it
            async with operator(c.paths) as op:
                await op_call(op, "send", to="alice", body="work now")
            await anyio.to_thread.run_sync(
                lambda: model_server.wait_for(
                    lambda reqs: any("work now" in _last_user(r.body) for r in reqs if r.main), 60
                )
            )
            async with operator(c.paths) as op:
                await op_call(op, "agent_kill", agent="alice")
            await until(lambda: rt.lifetime.stopping.is_set())
            release.set()  # the turn in flight finishes: it was the agent's last
            with anyio.fail_after(120):
                await rt.lifetime.done.wait()
            runs = await _runs(c, "alice", 2)
    finally:
        release.set()
    assert _flushes(model_server.requests, "alice") == []
    assert _turn_starts(rt) == 2 and len(runs) == 2
    assert rt.bus.last_turn is not None and rt.bus.last_turn["outcome"] == "ok"


async def test_the_stops_grace_cuts_a_flush_turn_that_does_not_end(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    script = _seed(tmp_path, model_server, alice=AgentConfig())
    script.stall_flush = Stall()  # the model never answers the flush
    try:
        async with running_hive(tmp_path, claude_bin) as (c, host):
            await until(lambda: "alice" in host.agents)
            rt = host.agents["alice"]
            await _a_turn(c, "alice", 0)
            await until(lambda: rt.bus.turn_state == "idle")
            async with anyio.create_task_group() as tg:
                # Far below the host's default grace: the flush must not outlive it.
                tg.start_soon(lambda: host.stop_all(grace=5.0))
                pid = await until(lambda: rt.turns.claude_pid, 60)  # the flush's claude
            # stop_all returned: the grace ran out and the activation was killed, its
            # claude with it.
            assert rt.lifetime.killed.is_set()
            with anyio.fail_after(30):
                await rt.lifetime.done.wait()
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
            runs = await c.store.spend.entries("alice", limit=10)
    finally:
        assert script.stall_flush is not None
        script.stall_flush.release.set()
    assert len(runs) == 1  # the cut flush reported nothing to count


async def test_an_agent_over_budget_is_stopped_with_no_flush_turn(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    _seed(tmp_path, model_server, alice=AgentConfig())
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        rt = host.agents["alice"]
        await _a_turn(c, "alice", 0)
        await until(lambda: rt.bus.turn_state == "idle")
        async with operator(c.paths) as op:
            await op_call(op, "budget_set", scope="alice", limits={"usd_total": CALL_USD / 2})
        await until_async(lambda: c.budgets.held("alice"))
        before = len(model_server.requests)
        async with operator(c.paths) as op:
            await op_call(op, "agent_kill", agent="alice")
        with anyio.fail_after(60):
            await rt.lifetime.done.wait()
        runs = await c.store.spend.entries("alice", limit=10)
    # Held by its budget, it takes no turn of any kind: a flush would spend past the limit.
    assert len(model_server.requests) == before
    assert _turn_starts(rt) == 1 and len(runs) == 1
