"""Budgets end to end: the real claude CLI against the scripted model, whose usage per
reply drives an agent over its daily limit.

The next message is held (not delivered, not lost), the operator is told,
raising the limit delivers it, and a subagent's run counts to its parent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.config import AgentConfig
from hyperhive.names import OPERATOR
from tests.support.hive import agent_env, op_call, operator, running_hive, seed_home
from tests.support.model_server import ModelServer
from tests.support.spend_script import BIG, SMALL, SUB, spending, start_scout
from tests.support.surfaces import until, until_async

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(180)]

LIMIT = 4000


async def _inbox(paths: Any) -> list[dict[str, Any]]:
    async with operator(paths) as op:
        rows = await op_call(op, "inbox", limit=200)
    assert isinstance(rows, list)
    return [r for r in rows if isinstance(r, dict)]


async def _arrives(c: Any, body_part: str, within: float = 90) -> dict[str, Any]:
    with anyio.fail_after(within):
        while True:
            arrived = c.notifier.event(OPERATOR)
            found = [m for m in await _inbox(c.paths) if body_part in m["body"]]
            if found:
                return found[0]
            await arrived.wait()


async def test_scripted_spend_holds_an_agent_and_raising_the_limit_resumes_it(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    model_server.set_script(spending)
    config = AgentConfig.model_validate(
        {"env": agent_env(model_server.url), "budget": {"tokens_per_day": LIMIT}}
    )
    seed_home(tmp_path, {"alice": config})
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        rt = host.agents["alice"]

        # A subagent's run counts to alice.
        await start_scout(host, "alice")

        async def subagent_counted() -> list[Any]:
            entries = await c.store.spend.entries("alice")
            return entries if any(e.kind == "subagent" for e in entries) else []

        entries = await until_async(subagent_counted, within=90)
        [scout] = [e for e in entries if e.kind == "subagent"]
        assert (scout.input_tokens, scout.output_tokens) == (SUB.input_tokens, SUB.output_tokens)
        assert scout.cost_usd > 0  # claude priced it from the usage

        # The scout's end wakes a turn of its own ("noted"); ping-1 waits until it has
        # ended, or it would be offered to that turn mid-turn and its calls sum with it.
        async def scout_turn() -> list[Any]:
            return [e for e in await c.store.spend.entries("alice") if e.kind == "turn"]

        [woken] = await until_async(scout_turn, within=90)
        assert (woken.input_tokens, woken.output_tokens) == (
            SMALL.input_tokens,
            SMALL.output_tokens,
        )

        # A turn priced over the limit: the agent finishes it, then is held.
        async with operator(c.paths) as op:
            await op_call(op, "send", to="alice", body="ping-1")
        await _arrives(c, "pong-1")
        notice = await _arrives(c, "Budget reached")
        assert (
            notice["from"] == "system" and f"of its {LIMIT:,} tokens daily limit" in notice["body"]
        )
        turns = [e for e in await c.store.spend.entries("alice") if e.kind == "turn"]
        # claude's result sums the turn's model calls: the tool call and the answer.
        assert BIG.input_tokens + 10 in [e.input_tokens for e in turns]
        async with operator(c.paths) as op:
            rows = await op_call(op, "agents")
        assert isinstance(rows, list)
        [alice] = [r for r in rows if isinstance(r, dict) and r["name"] == "alice"]
        assert str(alice["over_budget"]).startswith("alice: ")

        # The next message is held: neither delivered nor acked, and no turn starts.
        turns_before = sum(1 for e in rt.bus.history if e["kind"] == "turn_start")
        requests_before = len(model_server.main_requests)
        async with operator(c.paths) as op:
            sent = await op_call(op, "send", to="alice", body="ping-2")
        assert isinstance(sent, dict)
        # A window beyond several wake-ups: a harness that was not held would have started.
        await anyio.sleep(3)
        row = await c.store.messages.get(int(sent["id"]))
        assert row is not None and row.delivered_at is None and row.acked_at is None
        assert sum(1 for e in rt.bus.history if e["kind"] == "turn_start") == turns_before
        assert len(model_server.main_requests) == requests_before

        # Raising the limit delivers it, and the agent answers.
        async with operator(c.paths) as op:
            await op_call(op, "budget_set", scope="alice", limits={"tokens_per_day": 10**9})
        await _arrives(c, "pong-2")

        async def acked() -> bool:
            got = await c.store.messages.get(int(sent["id"]))
            return got is not None and got.acked

        await until_async(acked)

        async with operator(c.paths) as op:
            report = await op_call(op, "spend")
        assert isinstance(report, dict)
        entries = await c.store.spend.entries("alice")
        [mine] = [r for r in report["agents"] if r["agent"] == "alice"]
        assert mine["all_time"]["tokens"] == sum(e.tokens for e in entries)
        assert mine["all_time"]["usd"] == pytest.approx(sum(e.cost_usd for e in entries))
        assert {e.kind for e in entries} >= {"turn", "subagent"}
