"""Spend budgets on a real coordinator: counting, holding, notices, run-time limits, a new day.

The harness's side is played over the agent's own socket (``turn_end`` with
its spend, ``wait``), so each rule is seen exactly; the real claude CLI drives
the same path in ``tests/e2e/test_budgets_e2e.py``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.budgets import HiveBudget
from hyperhive.config import AgentConfig, HivePaths
from hyperhive.core.broker import Broker
from hyperhive.core.budgets import Budgets
from hyperhive.core.mirror import MetaMirror
from hyperhive.core.notify import EventBus, Notifier
from hyperhive.core.registry import AgentRegistry
from hyperhive.errors import InvalidRequest
from hyperhive.names import OPERATOR
from hyperhive.protocol import RunSpend, TurnEndReq
from hyperhive.store import open_store
from tests.support.hive import (
    agent,
    agent_call,
    coordinator,
    hive_config,
    op_call,
    operator,
    seed_home,
)
from tests.support.spend import reported

pytestmark = pytest.mark.anyio

ALICE = "budget = { tokens_per_day = 100 }\n"


def _spend(tokens: int, usd: float = 0.0, kind: str = "turn") -> dict[str, Any]:
    """A run of a session of its own: it counts ``usd`` and ``tokens`` whole."""
    return reported(usd, tokens, kind)


def _run(usd: float = 0.0, tokens: int = 0, run_id: str | None = None) -> RunSpend:
    return RunSpend.model_validate(reported(usd, tokens, run_id=run_id))


async def _operator_inbox(paths: HivePaths) -> list[str]:
    async with operator(paths) as op:
        rows = await op_call(op, "inbox", limit=100)
    assert isinstance(rows, list)
    return [str(r["body"]) for r in rows if isinstance(r, dict) and r["from"] == "system"]


async def _alice_row(paths: HivePaths) -> dict[str, Any]:
    async with operator(paths) as op:
        rows = await op_call(op, "agents")
    assert isinstance(rows, list)
    row = next(r for r in rows if isinstance(r, dict) and r["name"] == "alice")
    assert isinstance(row, dict)
    return row


async def test_an_agent_over_its_daily_limit_is_held_until_the_limit_is_raised(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    paths = seed_home(tmp_path, {"alice": ALICE, "bob": AgentConfig()}, store_url=hive_store_url)
    async with coordinator(tmp_path), agent(paths, "alice") as alice:
        await agent_call(alice, "attach")
        first = _spend(85, 0.5)
        await agent_call(alice, "turn_end", outcome="ok", spend=first)
        # 85 of 100: the operator is warned, once, however often the report is resent.
        await agent_call(alice, "turn_end", outcome="ok", spend=first)
        warnings = await _operator_inbox(paths)
        assert len(warnings) == 1 and "Budget warning: alice: 85 tokens of its 100" in warnings[0]
        assert (await _alice_row(paths))["over_budget"] is None

        # A run that crosses the limit is the last: the agent is held.
        await agent_call(alice, "turn_end", outcome="ok", spend=_spend(20, 0.25))
        notices = await _operator_inbox(paths)
        assert len(notices) == 2 and "Budget reached: alice: 105 tokens" in notices[1]
        assert "hivectl budget set alice --tokens-per-day" in notices[1]
        assert (await _alice_row(paths))["over_budget"] == (
            "alice: 105 tokens of its 100 tokens daily limit"
        )

        async with operator(paths) as op:
            sent = await op_call(op, "send", to="alice", body="are you there?")
            assert isinstance(sent, dict)
            woke = await agent_call(alice, "wait", timeout=0.3)
            assert isinstance(woke, dict) and woke["messages"] == []
            views = await op_call(op, "messages", agent="alice")
            assert isinstance(views, dict)
            [held] = views["inbox"]
            assert (held["id"], held["acked"]) == (sent["id"], False)

            # Raising the limit wakes the held wait and delivers the mail.
            async with anyio.create_task_group() as tg:
                got: dict[str, Any] = {}

                async def waiter() -> None:
                    result = await agent_call(alice, "wait", timeout=30)
                    assert isinstance(result, dict)
                    got.update(result)

                tg.start_soon(waiter)
                await anyio.sleep(0.2)  # let the wait start and be held
                view = await op_call(
                    op, "budget_set", scope="alice", limits={"tokens_per_day": 1000}
                )
            assert [m["body"] for m in got["messages"]] == ["are you there?"]
            assert isinstance(view, dict)
            scope = next(s for s in view["scopes"] if s["scope"] == "alice")
            assert scope["overrides"] == {"tokens_per_day": 1000}
            assert scope["configured"]["tokens_per_day"] == 100
            assert scope["today"] == {"usd": 0.75, "tokens": 105} and scope["over"] is None

            report = await op_call(op, "spend")
        assert isinstance(report, dict)
        row = next(r for r in report["agents"] if r["agent"] == "alice")
        assert row["all_time"] == {"usd": 0.75, "tokens": 105} == row["today"] == row["week"]
        assert report["total"]["all_time"] == {"usd": 0.75, "tokens": 105}
        assert report["top_spenders"] == ["alice"]


async def test_a_held_agent_still_hears_a_graceful_stop(tmp_path: Path) -> None:
    paths = seed_home(tmp_path, {"alice": "budget = { usd_total = 0.0 }\n"})
    async with coordinator(tmp_path), agent(paths, "alice") as alice:
        await agent_call(alice, "attach")
        assert (await _alice_row(paths))["over_budget"] == "alice: $0.00 of its $0.00 total limit"
        await agent_call(alice, "fence")
        woke = await agent_call(alice, "wait", timeout=30)
        assert isinstance(woke, dict) and woke["stop"] is True


async def test_a_subagent_run_and_a_compaction_count_to_the_agent(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    paths = seed_home(
        tmp_path, {"alice": AgentConfig(), "bob": AgentConfig()}, store_url=hive_store_url
    )
    async with coordinator(tmp_path), agent(paths, "alice") as alice:
        sub = _spend(7, 0.125, kind="subagent")
        counted = {
            "cost_usd": 0.125,
            "input_tokens": 7,
            "output_tokens": 0,
            "cache_read_tokens": 0,
            "cache_creation_tokens": 0,
        }
        assert await agent_call(alice, "record_spend", spend=sub) == {
            "recorded": True,
            "spend": counted,
        }
        assert await agent_call(alice, "record_spend", spend=sub) == {
            "recorded": False,
            "spend": counted,
        }
        await agent_call(alice, "turn_end", outcome="ok", spend=_spend(3, 0.5, "compaction"))
        async with operator(paths) as op:
            report = await op_call(op, "spend")
        assert isinstance(report, dict)
        rows = {r["agent"]: r["all_time"] for r in report["agents"]}
        assert rows == {"alice": {"usd": 0.625, "tokens": 10}, "bob": {"usd": 0.0, "tokens": 0}}


async def test_the_hive_limit_holds_every_agent_and_bad_limits_are_refused(
    tmp_path: Path,
) -> None:
    paths = seed_home(
        tmp_path,
        {"alice": AgentConfig(), "bob": AgentConfig()},
        hive_toml='[budget]\nusd_per_day = 1.0\ntimezone = "UTC"\n',
    )
    async with coordinator(tmp_path), agent(paths, "alice") as alice:
        await agent_call(alice, "turn_end", outcome="ok", spend=_spend(1, 1.5))
        async with operator(paths) as op:
            rows = await op_call(op, "agents")
            assert isinstance(rows, list)
            held = {r["name"]: r["over_budget"] for r in rows if isinstance(r, dict)}
            assert held == {
                "alice": "the whole hive: $1.50 of its $1.00 daily limit",
                "bob": "the whole hive: $1.50 of its $1.00 daily limit",
            }
            with pytest.raises(InvalidRequest, match="greater than or equal to 0"):
                await op_call(op, "budget_set", scope="*", limits={"usd_per_day": -1})
            with pytest.raises(Exception, match="ghost"):
                await op_call(op, "budget_set", scope="ghost", limits={"usd_total": 1})
            view = await op_call(op, "budget_set", scope="*", limits={"usd_per_day": None})
        assert isinstance(view, dict)
        assert view["timezone"] == "UTC"
        assert all(s["over"] is None for s in view["scopes"])


async def test_a_wait_parked_before_the_hive_limit_is_reached_is_held_not_handed_mail(
    tmp_path: Path,
) -> None:
    # bob's wait is parked in the store (answered by the commit that wakes him) when
    # alice's turn takes the hive over its limit: the next mail must wait all the same.
    paths = seed_home(
        tmp_path,
        {"alice": AgentConfig(), "bob": AgentConfig()},
        hive_toml='[budget]\nusd_per_day = 1.0\ntimezone = "UTC"\n',
    )
    async with coordinator(tmp_path), agent(paths, "alice") as alice, agent(paths, "bob") as bob:
        await agent_call(bob, "attach")
        got: dict[str, Any] = {}

        async def waiter(within: float) -> None:
            result = await agent_call(bob, "wait", timeout=within)
            assert isinstance(result, dict)
            got.update(result)

        async with operator(paths) as op, anyio.create_task_group() as tg:
            tg.start_soon(waiter, 1.5)  # held: it runs out with nothing
            await anyio.sleep(0.3)  # parked
            await agent_call(alice, "turn_end", outcome="ok", spend=_spend(1, 1.5))
            await op_call(op, "send", to="bob", body="not now")
        assert got["messages"] == []

        async with operator(paths) as op, anyio.create_task_group() as tg:
            got.clear()
            # Woken by the lift, however long that takes on a loaded machine.
            tg.start_soon(waiter, 30.0)
            await anyio.sleep(0.3)
            await op_call(op, "budget_set", scope="*", limits={"usd_per_day": None})
        assert [m["body"] for m in got["messages"]] == ["not now"]


async def test_a_new_day_in_the_operators_zone_lifts_a_daily_limit(tmp_path: Path) -> None:
    """The service on a real store, its clock the one plain part set by the test."""
    paths = seed_home(tmp_path, {"alice": "budget = { usd_per_day = 1.0, usd_total = 5.0 }\n"})
    zone = dt.timezone(dt.timedelta(hours=-5))
    now = [dt.datetime(2026, 12, 1, 23, 50, tzinfo=zone).timestamp()]
    store = await open_store(paths.home, hive_config(paths.home).store)
    try:
        notifier = Notifier()
        bus = EventBus()
        # The seeded home's files become the store's applied configs, as a coordinator's start does.
        await MetaMirror(paths, store.meta).adopt()
        registry = AgentRegistry(paths, store.meta)
        await registry.load()
        budgets = Budgets(
            store,
            registry,
            HiveBudget(timezone="Etc/GMT+5"),  # POSIX sign: five hours behind UTC
            Broker(store, notifier, 65536),
            notifier,
            bus,
            clock=lambda: now[0],
        )
        assert (await budgets.record("alice", _run(1.0)))[1]
        hit = await budgets.held("alice")
        assert hit is not None and hit.key == "usd_per_day"
        now[0] += 15 * 60  # 00:05 the next day, operator's time
        assert await budgets.held("alice") is None
        report = await budgets.report()
        assert report.day == "2026-12-02"
        assert report.agents[0].today.usd == 0.0 and report.agents[0].all_time.usd == 1.0
        for _ in range(4):
            await budgets.record("alice", _run(1.0))
            now[0] += 86400
        total = await budgets.held("alice")
        assert total is not None and total.key == "usd_total"  # no new day lifts a total
        inbox = [m.body for m in await store.messages.inbox(OPERATOR)]
        reached = [b for b in inbox if "Budget reached" in b]
        # Once per day and limit: the daily limit on each of five days, the total once.
        assert sum("daily limit" in b for b in reached) == 5
        assert [b for b in reached if "total limit" in b] == [
            "Budget reached: alice: $5.00 of its $5.00 total limit. alice takes no new turns "
            "(mail waits, nothing is lost) until the limit is raised (`hivectl budget set "
            "alice --usd-total N`, or the dashboard's spend page)."
        ]
    finally:
        await store.close()


async def test_turn_end_refuses_negative_spend(tmp_path: Path) -> None:
    paths = seed_home(tmp_path, {"alice": AgentConfig()})
    async with coordinator(tmp_path), agent(paths, "alice") as alice:
        with pytest.raises(Exception, match="greater than or equal to 0"):
            await alice.call(
                TurnEndReq.model_validate({"cmd": "turn_end", "outcome": "ok", "spend": _spend(-5)})
            )


async def test_the_cached_totals_match_the_store_under_concurrent_records(
    tmp_path: Path,
) -> None:
    seed_home(tmp_path, {"alice": AgentConfig(), "bob": AgentConfig()})
    async with coordinator(tmp_path) as c:
        budgets = c.budgets

        async def record(i: int) -> None:
            agent = "alice" if i % 2 else "bob"
            await budgets.record(agent, _run(tokens=i))

        async def read() -> None:
            for _ in range(20):
                await budgets.held("alice")  # the first builds the cache while records land

        async with anyio.create_task_group() as tg:
            for i in range(60):
                tg.start_soon(record, i)
            tg.start_soon(read)
        report = await budgets.report()
        stored = await c.store.spend.totals()
    assert (
        {r.agent: r.all_time.tokens for r in report.agents}
        == {a: t.tokens for a, t in stored.items()}
        == {"alice": sum(range(1, 60, 2)), "bob": sum(range(0, 60, 2))}
    )
