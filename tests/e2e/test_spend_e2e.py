"""Spend counted per run, end to end: the real claude CLI resumes one session turn after
turn, and every figure the hive shows is the run's own usage × price.

The scripted model answers every call with the same usage, so each model call costs
``CALL_USD`` at claude's price for Sonnet 4.5 ($3 / $15 per million input / output
tokens), and a turn is one call. claude reports a resumed session's totals so far;
counting those as the run's cost gave turns of 1, 2, 3… calls.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hyperhive.config import AgentConfig, HivePaths
from hyperhive.store.rows import SpendEntry
from tests.e2e.test_metrics import dashboard_client, parse, value
from tests.support.hive import agent_env, op_call, operator, running_hive, seed_home
from tests.support.model_server import ModelServer, Usage, text
from tests.support.procs import hivectl_json
from tests.support.spans import named
from tests.support.surfaces import result_text, surface_client, until, until_async

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(300)]

SONNET = "claude-sonnet-4-5-20250929"
CALL = Usage(input_tokens=50_800, output_tokens=5)
CALL_USD = (CALL.input_tokens * 3 + CALL.output_tokens * 15) / 1e6  # $0.152475
CALL_TOKENS = CALL.input_tokens + CALL.output_tokens


def _seed(home: Path, model_server: ModelServer, **budget: float) -> HivePaths:
    model_server.set_script(lambda body: text("noted", CALL))
    config = {"env": agent_env(model_server.url), "model": SONNET}
    if budget:
        config["budget"] = budget
    return seed_home(
        home, {"alice": AgentConfig.model_validate(config)}, hive_toml="dashboard_port = 0\n"
    )


def _calls(model_server: ModelServer) -> int:
    """Model calls so far; every one is billed the same."""
    messages = [r for r in model_server.requests if r.path == "/v1/messages"]
    assert all(r.main for r in messages), "a side call would be priced differently"
    return len(messages)


async def _runs(c: Any, n: int) -> list[SpendEntry]:
    """alice's first ``n`` counted runs, oldest first, once each has ended everywhere:
    counted (spend), in the feed (written next) and told in the agent log (last)."""

    async def counted() -> list[SpendEntry]:
        rows = await c.store.spend.entries("alice", limit=100)
        feed = [r for r in await c.store.activity.page(kind="turn") if r.agent == "alice"]
        told = _turn_end_lines(c.paths) if (c.paths.logs / "agents" / "alice.log").exists() else []
        return rows[::-1] if min(len(rows), len(feed), len(told)) >= n else []

    rows: list[SpendEntry] = await until_async(counted, within=120)
    return rows


async def _turn(c: Any, body: str, runs_before: int) -> SpendEntry:
    async with operator(c.paths) as op:
        await op_call(op, "send", to="alice", body=body)
    return (await _runs(c, runs_before + 1))[runs_before]


def _turn_end_lines(paths: HivePaths) -> list[str]:
    log = (paths.logs / "agents" / "alice.log").read_text()
    return [line for line in log.splitlines() if " end" in line and "hyperhive: " in line]


async def test_three_turns_of_one_session_cost_three_turns_through_a_compaction_and_restarts(
    tmp_path: Path,
    model_server: ModelServer,
    claude_bin: Path,
    spans: InMemorySpanExporter,
) -> None:
    paths = _seed(tmp_path, model_server)
    session_file = paths.agent_state("alice") / "harness" / "session.json"
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        first = await _turn(c, "one", 0)
        second = await _turn(c, "two", 1)
        # A compaction in between: the checkpoint and /compact resume the same session.
        calls_before = _calls(model_server)
        async with operator(c.paths) as op:
            await op_call(op, "compact", agent="alice")
        compaction = (await _runs(c, 3))[2]
        compaction_calls = _calls(model_server) - calls_before
    # The hive restarts: the session resumes, differenced against the stored totals.
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        third = await _turn(c, "three", 3)
    # Again, without the session file: a new session, counted from nothing.
    session_file.unlink()
    async with running_hive(tmp_path, claude_bin) as (c, host), dashboard_client(c) as http:
        await until(lambda: "alice" in host.agents)
        fresh = await _turn(c, "four", 4)
        fifth = await _turn(c, "five", 5)
        calls = _calls(model_server)
        report = await anyio.to_thread.run_sync(lambda: hivectl_json(tmp_path, "spend"))
        metrics = parse((await http.get("/metrics")).text)
        feed = [r for r in await c.store.activity.page(kind="turn") if r.agent == "alice"]

    turns = [first, second, third, fresh, fifth]
    assert [t.kind for t in turns] == ["turn"] * 5 and compaction.kind == "compaction"
    assert compaction_calls >= 2  # the checkpoint, then /compact's own
    assert calls == 5 + compaction_calls
    # Every turn is one call's cost and tokens, whichever run of its session it was.
    for t in turns:
        assert t.cost_usd == pytest.approx(CALL_USD, rel=1e-9), turns
        assert (t.input_tokens, t.output_tokens) == (CALL.input_tokens, CALL.output_tokens)
    assert compaction.cost_usd == pytest.approx(compaction_calls * CALL_USD, rel=1e-9)
    assert compaction.tokens == compaction_calls * CALL_TOKENS
    # The first session went on through the compaction and the restart; the fourth is new.
    assert first.session_id == second.session_id == compaction.session_id == third.session_id
    assert fresh.session_id not in (None, first.session_id) and fifth.session_id == fresh.session_id
    assert third.session_usd == pytest.approx((3 + compaction_calls) * CALL_USD)
    assert fresh.session_usd == pytest.approx(CALL_USD)

    total_usd = calls * CALL_USD
    # hivectl spend --json
    [alice] = [r for r in report["agents"] if r["agent"] == "alice"]
    assert alice["all_time"]["usd"] == pytest.approx(total_usd, rel=1e-9)
    assert alice["all_time"]["tokens"] == calls * CALL_TOKENS
    assert report["total"]["all_time"]["usd"] == pytest.approx(total_usd, rel=1e-9)
    # /metrics
    assert value(metrics, "hyperhive_spend_usd_total", agent="alice") == pytest.approx(total_usd)
    assert value(metrics, "hyperhive_spend_tokens_total", agent="alice") == calls * CALL_TOKENS
    # The activity feed: one row per counted run, at its own cost.
    costs = sorted(r.detail["cost_usd"] for r in feed)
    assert costs == pytest.approx(sorted([CALL_USD] * 5 + [compaction_calls * CALL_USD]))
    assert sum(f"${CALL_USD:.4f}" in r.title for r in feed) == 5
    # The agent log's lines: each turn at one call's cost, the compaction at its calls'.
    ends = _turn_end_lines(paths)
    turn_costs = [re.search(r"\$([0-9.]+) \(session", x) for x in ends if "turn end: ok" in x]
    assert [float(m.group(1)) for m in turn_costs if m] == [round(CALL_USD, 4)] * 5, ends
    [compacted] = [x for x in ends if "compaction end" in x]
    assert f"${compaction_calls * CALL_USD:.4f}" in compacted
    # The trace: each turn's span says one call's cost and tokens.
    turn_spans = named(spans, "turn alice")
    assert len(turn_spans) == 5
    for span in turn_spans:
        attrs = dict(span.attributes or {})
        assert attrs["hyperhive.cost_usd"] == pytest.approx(CALL_USD, rel=1e-9)
        assert attrs["gen_ai.usage.input_tokens"] == CALL.input_tokens
    [compaction_span] = named(spans, "compaction alice")
    compaction_attrs = dict(compaction_span.attributes or {})
    assert compaction_attrs["hyperhive.cost_usd"] == pytest.approx(compaction_calls * CALL_USD)


async def test_a_budget_of_a_turn_and_a_half_holds_after_the_second_turn(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    _seed(tmp_path, model_server)
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        # The session has a turn behind it before the limit is set: the next runs resume it.
        await _turn(c, "zero", 0)
        async with operator(c.paths) as op:
            await op_call(op, "budget_set", scope="alice", limits={"usd_total": 2.5 * CALL_USD})
        one = await _turn(c, "one", 1)
        assert one.cost_usd == pytest.approx(CALL_USD, rel=1e-9)
        assert await c.budgets.held("alice") is None, "one turn and a half left: not held"
        await _turn(c, "two", 2)
        hit = await c.budgets.held("alice")
        assert hit is not None and hit.key == "usd_total"
        assert hit.spent == pytest.approx(3 * CALL_USD)
        # Held: the next message is neither delivered nor answered.
        requests = len(model_server.requests)
        async with operator(c.paths) as op:
            sent = await op_call(op, "send", to="alice", body="three")
            assert isinstance(sent, dict)
            # A window beyond several wake-ups: a harness that was not held would have started.
            await anyio.sleep(3)
            row = await c.store.messages.get(int(sent["id"]))
            assert row is not None and row.delivered_at is None
            assert len(model_server.requests) == requests
            inbox = await op_call(op, "inbox", limit=50)
    assert isinstance(inbox, list)
    notices = [m["body"] for m in inbox if isinstance(m, dict) and "Budget reached" in m["body"]]
    assert notices == [
        f"Budget reached: alice: ${3 * CALL_USD:.2f} of its ${2.5 * CALL_USD:.2f} total limit. "
        "alice takes no new turns (mail waits, nothing is lost) until the limit is raised "
        "(`hivectl budget set alice --usd-total N`, or the dashboard's spend page)."
    ]


async def test_a_subagents_continue_counts_its_own_run(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    """A subagent's ``continue`` resumes its claude session: like a turn, it is counted at
    the difference of the session's totals."""
    model_server.set_script(lambda body: text("noted", CALL))
    config = {"env": agent_env(model_server.url), "model": SONNET, "subagent_model": SONNET}
    seed_home(tmp_path, {"alice": AgentConfig.model_validate(config)})
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)

        async def subagent_runs(n: int) -> list[SpendEntry]:
            async def counted() -> list[SpendEntry]:
                rows = await c.store.spend.entries("alice", limit=100)
                runs = [e for e in rows if e.kind == "subagent"]
                return runs[::-1] if len(runs) >= n else []

            found: list[SpendEntry] = await until_async(counted, within=120)
            return found

        async with surface_client(host, "alice", "subagent") as sub:
            started = await sub.call_tool("start", {"prompt": "look around", "name": "scout"})
            assert "subagent started: id=scout" in result_text(started), started
            await subagent_runs(1)
            again = await sub.call_tool("continue", {"id": "scout", "prompt": "look again"})
            assert "continues in its session (run 2)" in result_text(again), again
            first, second = await subagent_runs(2)
    assert first.cost_usd == pytest.approx(CALL_USD, rel=1e-9)
    assert second.cost_usd == pytest.approx(CALL_USD, rel=1e-9)
    assert first.session_id == second.session_id is not None
    assert second.session_usd == pytest.approx(2 * CALL_USD)
