"""A herd of wakes against the host's claude slots: the real claude CLI, the scripted model.

claude is started through a wrapper that appends ``start``/``end`` lines to a
log before exec'ing the real CLI and after it exits, so the log is the ground
truth of how many claude processes ran at once and in what order they began.
Each agent's model call stalls on a gate of its own, so the test decides when
a turn ends and every step is a state, not a race.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from hyperhive.agent.sandbox import CLAUDE_OOM_SCORE_ADJ
from hyperhive.config import AgentConfig
from hyperhive.core.dashboard.server import serve_dashboard
from tests.support.hive import agent_env, op_call, operator, running_hive, seed_home
from tests.support.model_server import Answer, ModelServer, Stall, Usage, text
from tests.support.procs import hivectl
from tests.support.surfaces import eventually, result_text, surface_client, until, until_async

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(180)]

GOAL = "mcp__subagent_control__goal_reached"


def _wrapper(tmp_path: Path, claude_bin: Path) -> tuple[Path, Path]:
    """A claude that logs ``start AGENT`` / ``end AGENT RC`` around the real one."""
    log = tmp_path / "claude-runs.log"
    log.touch()
    wrapper = tmp_path / "claude-logged"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'echo "start $HIVE_AGENT" >> "{log}"\n'
        f'"{claude_bin}" "$@"\n'
        "rc=$?\n"
        f'echo "end $HIVE_AGENT $rc" >> "{log}"\n'
        "exit $rc\n"
    )
    wrapper.chmod(0o755)
    return wrapper, log


def _runs(log: Path) -> list[list[str]]:
    return [line.split() for line in log.read_text().splitlines() if line.strip()]


def _concurrency(runs: list[list[str]]) -> int:
    """The most claude processes alive at once, replaying the log."""
    alive = peak = 0
    for run in runs:
        alive += 1 if run[0] == "start" else -1
        peak = max(peak, alive)
    return peak


def _started(runs: list[list[str]]) -> list[str]:
    return [r[1] for r in runs if r[0] == "start"]


def _gated(gates: dict[str, threading.Event]) -> Any:
    """Each agent's model call waits for that agent's gate, then ends the turn."""

    def answer(body: dict[str, Any]) -> Answer:
        said = json.dumps(body.get("messages", []))
        for name, gate in gates.items():
            if f"wake-{name}" in said:
                return Stall(release=gate, then=text(f"{name} done"))
        return text("done")

    return answer


def _seed(home: Path, model: ModelServer, names: list[str], slots: int) -> None:
    config = AgentConfig(env=agent_env(model.url))
    toml = f"claude_slots = {slots}\ndashboard_port = 0\n"
    seed_home(home, dict.fromkeys(names, config), hive_toml=toml)


async def _dashboard_tree(c: Any) -> str:
    """The dashboard's agent tree page, as the operator's browser gets it."""
    async with anyio.create_task_group() as tg:
        url = await tg.start(serve_dashboard, c.dashboard_parts())
        token = (c.paths.run / "dashboard-token").read_text().strip()
        async with httpx.AsyncClient(base_url=url) as http:
            page = await http.get("/tree", headers={"authorization": f"Bearer {token}"})
        tg.cancel_scope.cancel()
    assert page.status_code == 200, page.text
    return page.text


async def _wake(c: Any, name: str) -> None:
    async with operator(c.paths) as op:
        await op_call(op, "send", to=name, body=f"wake-{name}")


async def _acked(c: Any, name: str) -> bool:
    async with operator(c.paths) as op:
        views = await op_call(op, "messages", agent=name)
    assert isinstance(views, dict)
    return bool(views["inbox"]) and all(m["acked"] for m in views["inbox"])


async def test_a_herd_of_wakes_runs_within_the_slots_in_wake_order(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    names = [f"a{i}" for i in range(6)]
    gates = {n: threading.Event() for n in names}
    model_server.set_script(_gated(gates))
    _seed(tmp_path, model_server, names, slots=2)
    wrapper, log = _wrapper(tmp_path, claude_bin)
    try:
        async with running_hive(tmp_path, wrapper) as (c, host):
            await until(
                lambda: all(n in host.agents and host.agents[n].connection.up for n in names)
            )
            assert host.admission.capacity == 2
            # Wake them one by one; each is seen running or queued before the next wakes,
            # so the wake order is known.
            for i, name in enumerate(names):
                await _wake(c, name)
                if i < 2:
                    await until(lambda name=name: name in _started(_runs(log)))
                else:
                    await until(
                        lambda name=name: host.agents[name].bus.turn_state == "waiting_slot"
                    )
            assert [w.agent for w in host.admission.waiting()] == names[2:]
            assert _started(_runs(log)) == names[:2]
            # The host reports each state over its link a moment later: the coordinator's
            # view (status, the tree) is in step once the last one has landed.
            await until(lambda: [a for a, _ in c.hostlink.waiting_for_slots()] == names[2:])

            # The operator sees who waits, and since when, in `hivectl status` and the tree.
            async with operator(c.paths) as op:
                status = await op_call(op, "status")
            assert isinstance(status, dict)
            assert status["claude_slots"] == {"test-host": 2}
            waiting = status["waiting_slot"]
            assert isinstance(waiting, list)
            assert [w["agent"] for w in waiting if isinstance(w, dict)] == names[2:]
            shown = await anyio.to_thread.run_sync(lambda: hivectl(tmp_path, "status").stdout)
            line = next(li for li in shown.splitlines() if li.startswith("waiting_slot"))
            assert [part.split()[0] for part in line.split(None, 1)[1].split(", ")] == names[2:]
            tree = await _dashboard_tree(c)
            for name in names:
                row = tree.split(f'data-agent="{name}"', 1)[1].split("</li>", 1)[0]
                queued = 'class="turn turn-waiting_slot"' in row
                assert queued == (name in names[2:]), row
                assert 'class="since" data-since="' in row
                if queued:
                    assert ">waiting_slot <" in row

            # End the running turns one at a time: each frees a slot for the next in line.
            for i, name in enumerate(names):
                gates[name].set()
                await until(lambda name=name: ["end", name, "0"] in _runs(log), within=60)
                if i + 2 < len(names):
                    nxt = names[i + 2]
                    await until(lambda nxt=nxt: nxt in _started(_runs(log)), within=60)
                    assert _concurrency(_runs(log)) == 2
            for name in names:
                await until(lambda name=name: host.agents[name].bus.last_turn, within=60)
            assert [host.agents[n].bus.last_turn["outcome"] for n in names] == ["ok"] * 6
            for name in names:
                # The ack follows last_turn (the host reports the turn's end after it).
                await until_async(lambda name=name: _acked(c, name))
            assert host.admission.in_use == 0 and host.admission.waiting() == []
    finally:
        for gate in gates.values():
            gate.set()
    runs = _runs(log)
    assert _started(runs) == names  # woken first, run first
    assert _concurrency(runs) == 2  # the limit held, and was used
    assert sorted(r[1] for r in runs if r[0] == "end" and r[2] == "0") == sorted(names)


async def test_stopping_an_agent_that_waits_for_a_slot_takes_it_out_of_the_queue_at_once(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    gates = {"busy": threading.Event(), "queued": threading.Event()}
    model_server.set_script(_gated(gates))
    _seed(tmp_path, model_server, ["busy", "queued"], slots=1)
    try:
        async with running_hive(tmp_path, claude_bin) as (c, host):
            await until(
                lambda: all(host.agents.get(n) and host.agents[n].connection.up for n in gates)
            )
            await _wake(c, "busy")
            await until(lambda: host.agents["busy"].turns.claude_pid)
            await _wake(c, "queued")
            await until(lambda: host.agents["queued"].bus.turn_state == "waiting_slot")

            # A graceful stop: the busy turn would hold the slot for as long as the
            # test likes, yet the queued agent is gone well within the stop's grace.
            async with operator(c.paths) as op:
                await op_call(op, "agent_kill", agent="queued")
            await until(lambda: "queued" not in host.agents, within=30)
            assert host.admission.waiting() == [] and host.admission.in_use == 1
            assert not await _acked(c, "queued")  # its turn never ran: the mail waits for it

            # The OOM killer's pick is the claude, not the host (this very process).
            pid = host.agents["busy"].turns.claude_pid
            assert pid is not None
            claude_adj = int(Path(f"/proc/{pid}/oom_score_adj").read_text())
            host_adj = int(Path("/proc/self/oom_score_adj").read_text())
            assert claude_adj == CLAUDE_OOM_SCORE_ADJ > host_adj

            gates["busy"].set()
            await until(lambda: host.agents["busy"].bus.last_turn, within=60)
            await until_async(lambda: _acked(c, "busy"))  # the ack follows last_turn
    finally:
        for gate in gates.values():
            gate.set()


async def test_a_compaction_queues_for_a_slot_behind_an_earlier_wake(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    """The checkpoint and /compact turns take a slot too, in their place in the line."""
    busy_gate, comp_gate = threading.Event(), threading.Event()
    comp_calls: list[str] = []

    def answer(body: dict[str, Any]) -> Answer:
        said = json.dumps(body.get("messages", []))
        if "wake-busy" in said:
            return Stall(release=busy_gate, then=text("busy done"))
        comp_calls.append(said)
        if len(comp_calls) == 1:  # comp's own turn ends 90% full: compaction follows
            return Stall(release=comp_gate, then=text("comp done", Usage(input_tokens=900)))
        return text("noted")

    model_server.set_script(answer)
    config = AgentConfig(env=agent_env(model_server.url))
    seed_home(
        tmp_path,
        {"busy": config, "comp": config},
        hive_toml="claude_slots = 1\ncontext_window = 1000\n",
    )
    try:
        async with running_hive(tmp_path, claude_bin) as (c, host):
            await until(
                lambda: all(
                    host.agents.get(n) and host.agents[n].connection.up for n in ("busy", "comp")
                )
            )
            comp, busy = host.agents["comp"], host.agents["busy"]
            await _wake(c, "comp")
            await until(lambda: comp.turns.claude_pid)
            await _wake(c, "busy")
            await until(lambda: busy.bus.turn_state == "waiting_slot")

            comp_gate.set()  # comp's turn ends; busy was first in line
            await until(lambda: busy.turns.claude_pid and comp.bus.turn_state == "waiting_slot")
            assert [(w.agent, w.kind) for w in host.admission.waiting()] == [("comp", "turn")]
            assert len(comp_calls) == 1  # no checkpoint turn has run yet

            busy_gate.set()
            await until(lambda: len(comp_calls) >= 3, within=60)  # checkpoint, then /compact
            await until(lambda: comp.bus.turn_state == "idle" and host.admission.in_use == 0)
            assert "compacted right after this turn" in comp_calls[1]
    finally:
        busy_gate.set()
        comp_gate.set()


def _subagent_script(stall: threading.Event) -> Any:
    def answer(body: dict[str, Any]) -> Answer:
        tools = [t["name"] for t in body.get("tools") or []]
        if GOAL not in tools:
            return text("parent noted it")
        if "KEYWORD-STALL" in json.dumps(body.get("messages", [])):
            return Stall(release=stall, then=text("stalled answer"))
        return text("quick answer")

    return answer


async def test_subagents_queue_for_a_slot_without_blocking_their_parent(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    stall = threading.Event()
    model_server.set_script(_subagent_script(stall))
    _seed(tmp_path, model_server, ["alice"], slots=1)
    try:
        async with running_hive(tmp_path, claude_bin) as (c, host):
            await until(lambda: "alice" in host.agents and host.agents["alice"].subagents)
            manager = host.agents["alice"].subagents
            assert manager is not None
            async with surface_client(host, "alice", "subagent") as sub:
                first = await sub.call_tool("start", {"prompt": "KEYWORD-STALL", "name": "one"})
                assert result_text(first).startswith("subagent started: id=one"), first
                process = manager._entries["one"].process
                assert process is not None
                adj = int(Path(f"/proc/{process.pid}/oom_score_adj").read_text())
                assert adj == CLAUDE_OOM_SCORE_ADJ

                # The slot is taken: start returns at once, queued, and says so.
                second = await sub.call_tool("start", {"prompt": "go", "name": "two"})
                assert result_text(second).startswith("subagent queued for a free claude slot")
                seen = result_text(await sub.call_tool("status", {"id": "two"}))
                assert "waiting for a free claude slot" in seen
                third = await sub.call_tool("start", {"prompt": "go", "name": "three"})
                assert "queued" in result_text(third)
                assert [w.kind for w in host.admission.waiting()] == ["subagent", "subagent"]

                # Interrupting a queued subagent just takes it out of the queue.
                stopped = await sub.call_tool("interrupt", {"id": "two"})
                assert "interrupted" in result_text(stopped)
                seen = result_text(await sub.call_tool("status", {"id": "two"}))
                assert "subagent two: interrupted" in seen
                assert len(host.admission.waiting()) == 1

                stall.set()  # one ends; three gets the slot and runs to its end
                todos = await eventually(
                    c.paths, "alice", "subagent", lambda t: "one" in t and "three" in t, within=90
                )
                assert "stalled answer" in todos["one"] and "quick answer" in todos["three"]
                assert "two" not in todos
    finally:
        stall.set()
