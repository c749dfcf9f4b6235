"""What the real claude CLI reports about a session's cost: the facts ``hyperhive.runcost``
stands on, measured against the scripted model (a claude upgrade that changes one fails here).

- ``total_cost_usd`` and ``modelUsage`` of a resumed run are the session's totals so far;
- ``/compact`` reports no tokens in ``result.usage``, yet its calls are in the totals;
- a run stopped with SIGTERM has its calls saved into the totals, one killed outright not;
- a run that calls a second model (a subagent on another model) reports both.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from hyperhive.agent.steering import user_line
from hyperhive.agent.stream import ResultEvent, parse_line
from hyperhive.agent.turnreport import session_totals
from hyperhive.runcost import Figures, run_cost, summed
from tests.e2e.test_claude_cli import RUN_TIMEOUT, Agent
from tests.support.model_server import ModelServer, Reply, Stall, ToolUse, Usage, text

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

SONNET = "claude-sonnet-4-5-20250929"  # $3 / $15 per million input / output tokens
TURN = Usage(input_tokens=50_800, output_tokens=5)
TURN_USD = (50_800 * 3 + 5 * 15) / 1e6


@pytest.fixture
def agent(claude_bin: Path, model_server: ModelServer, tmp_path: Path) -> Agent:
    return Agent(claude_bin, model_server, tmp_path).setup()


def _argv(agent: Agent, session: str | None = None, *extra: str) -> list[str]:
    return [*agent.harness_argv(session), "--model", SONNET, *extra]


def _totals(agent: Agent, prompt: str, session: str | None = None) -> tuple[str, ResultEvent]:
    run = agent.run(prompt, _argv(agent, session))
    assert run.returncode == 0, run.stderr
    assert run.result.session_id
    return run.result.session_id, run.result


def test_a_resumed_run_reports_its_sessions_totals(agent: Agent) -> None:
    agent.server.set_script([text("one", TURN), text("two", TURN), text("three", TURN)])
    session, first = _totals(agent, "first")
    results = [first]
    for prompt in ("second", "third"):
        again, result = _totals(agent, prompt, session)
        assert again == session
        results.append(result)
    # Each run's own usage is one turn; the cost and per-model figures grow by one each.
    assert [r.usage.input_tokens for r in results] == [TURN.input_tokens] * 3
    assert [r.total_cost_usd for r in results] == pytest.approx([TURN_USD * k for k in (1, 2, 3)])
    assert [r.model_usage[SONNET].input_tokens for r in results] == [
        TURN.input_tokens * k for k in (1, 2, 3)
    ]
    # The rule turns them into three equal runs.
    previous: dict[str, Figures] = {}
    owns = []
    for result in results:
        counted = run_cost(previous, session_totals(result))
        owns.append(counted.own)
        previous = counted.totals
    assert [o.usd for o in owns] == pytest.approx([TURN_USD] * 3)
    assert [(o.input_tokens, o.output_tokens) for o in owns] == [(50_800, 5)] * 3


def test_compact_reports_no_usage_but_its_calls_are_in_the_totals(agent: Agent) -> None:
    agent.server.set_script([text("one", TURN), text("SUMMARY", TURN), text("two", TURN)])
    session, first = _totals(agent, "first")
    _, compact = _totals(agent, "/compact", session)
    assert compact.session_id == session  # /compact keeps the session
    assert compact.usage.input_tokens == 0 and compact.usage.output_tokens == 0
    calls = agent.server.main_requests
    assert len(calls) >= 2
    grown = summed(session_totals(compact).values()).input_tokens - TURN.input_tokens
    assert grown == TURN.input_tokens * (len(calls) - 1)
    assert run_cost(session_totals(first), session_totals(compact)).own.input_tokens == grown


def _stopped_run(agent: Agent, session: str, sig: signal.Signals) -> None:
    """A run whose first call is answered (a tool call) and whose second hangs; then ``sig``."""
    stall = Stall()
    agent.server.set_script([Reply([ToolUse("NoSuchTool", {"x": 1})], TURN), stall])
    before = len(agent.server.main_requests)
    proc = agent.popen(_argv(agent, session))
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(user_line("work"))
    proc.stdin.close()
    agent.server.wait_for(lambda reqs: sum(r.main for r in reqs) >= before + 2, timeout=RUN_TIMEOUT)
    os.killpg(proc.pid, sig)
    out = proc.stdout.read()
    proc.wait(timeout=RUN_TIMEOUT)
    stall.release.set()
    proc.stdout.close()
    proc.stderr.close()
    assert not any(isinstance(parse_line(x), ResultEvent) for x in out.splitlines())


@pytest.mark.parametrize(("sig", "saved"), [(signal.SIGTERM, True), (signal.SIGKILL, False)])
def test_a_stopped_run_is_saved_into_the_totals_only_if_claude_could_save(
    agent: Agent, sig: signal.Signals, saved: bool
) -> None:
    agent.server.set_script([text("one", TURN)])
    session, first = _totals(agent, "first")
    _stopped_run(agent, session, sig)
    agent.server.set_script([text("after", TURN)])
    _, after = _totals(agent, "after", session)
    own = run_cost(session_totals(first), session_totals(after)).own
    # The next run counts itself, and the stopped run's answered call if claude saved it.
    assert own.input_tokens == TURN.input_tokens * (2 if saved else 1)


def test_a_second_model_in_a_run_is_reported_beside_the_first(agent: Agent) -> None:
    def script(body: dict[str, Any]) -> Reply:
        last = json.dumps(body["messages"][-1])
        if "haiku" in str(body.get("model")):
            return text("sub done", Usage(1000, 10))
        if "delegate" in last and "tool_result" not in last:
            task = {"description": "d", "prompt": "p", "subagent_type": "general-purpose"}
            return Reply([ToolUse("Task", {**task, "model": "haiku"})], TURN)
        return text("all done", TURN)

    agent.server.set_script(script)
    argv = [str(agent.claude_bin), "--print", "--output-format", "stream-json", "--verbose"]
    argv += ["--model", SONNET, "--tools", "Task", "--allowedTools", "Task"]
    run = agent.run("delegate", argv)
    assert run.returncode == 0, run.stderr
    totals = session_totals(run.result)
    assert len(totals) == 2, totals
    [haiku] = [f for m, f in totals.items() if "haiku" in m]
    assert (haiku.input_tokens, haiku.output_tokens) == (1000, 10) and haiku.usd > 0
    own = run_cost({}, totals).own
    assert own.usd == pytest.approx(run.result.total_cost_usd)
    assert own.input_tokens == summed(totals.values()).input_tokens
