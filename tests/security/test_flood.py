"""Flooding ``remind`` and ``send``: limits hold, and a benign agent is still served.

The attacker opens several connections and hammers its socket; meanwhile a
benign agent on its own socket makes ordinary calls one after another. Every
benign call must succeed; its latency (p50/p99/max) is measured and reported,
never asserted (timing belongs to ``bench/``).
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from hyperhive.client import RpcClient, connect
from hyperhive.errors import HiveError, LimitExceeded
from tests.security.hostile import (
    ATTACKER,
    assert_unchanged,
    percentile,
    plant,
    refusal,
    report,
    seed,
    snapshot,
)
from tests.support.hive import agent_call, coordinator

# A hang guard, not a speed limit (12,000 sends): on PostgreSQL beside a loaded
# two-worker run the flood took over 90 s, and its timeout broke the next tests too.
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]

CONNECTIONS = 8
REMINDS_PER_CONNECTION = 40  # 320 attempts against a limit of 50
SENDS_PER_CONNECTION = 1500  # 12,000 messages


async def _flood(client: RpcClient, outcomes: dict[str, int]) -> None:
    for i in range(REMINDS_PER_CONNECTION):
        err = await refusal(client, {"cmd": "remind", "message": f"r{i}", "delay_seconds": 3600})
        key = "remind_ok" if err is None else f"remind_{err.code}"
        outcomes[key] = outcomes.get(key, 0) + 1
        if err is not None:
            assert isinstance(err, LimitExceeded) and "the limit is 50" in err.message
    async with anyio.create_task_group() as tg:
        # Sixteen sends in flight per connection (half the per-connection window).
        for lane in range(16):
            tg.start_soon(_sends, client, lane, outcomes)


async def _sends(client: RpcClient, lane: int, outcomes: dict[str, int]) -> None:
    for i in range(lane, SENDS_PER_CONNECTION, 16):
        to = ATTACKER if i % 2 else "<parent>"
        await agent_call(client, "send", to=to, body=f"flood {i}")
        outcomes["send_ok"] = outcomes.get("send_ok", 0) + 1


async def test_a_flood_is_limited_and_a_benign_agent_stays_served(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    seed(tmp_path)
    async with coordinator(tmp_path) as c:
        await plant(c)
        before = snapshot(c.paths, mine=(ATTACKER, "benign"))
        outcomes: dict[str, int] = {}
        latencies: list[float] = []
        failures: list[str] = []
        flooding = anyio.Event()
        done = anyio.Event()

        async def benign() -> None:
            async with connect(c.paths.agent_sock("benign")) as me:
                await flooding.wait()
                i = 0
                while not done.is_set():
                    cmd = ("get_agent_meta", "set_status", "send", "recv")[i % 4]
                    fields: dict[str, object] = {
                        "get_agent_meta": {},
                        "set_status": {"text": f"busy {i}"},
                        "send": {"to": "benign", "body": f"note {i}"},
                        "recv": {"max": 5},
                    }[cmd]
                    started = time.perf_counter()
                    try:
                        await agent_call(me, cmd, **fields)
                    except HiveError as exc:
                        failures.append(f"{cmd}: {exc.code} {exc.message}")
                    latencies.append(time.perf_counter() - started)
                    i += 1

        async def attacker() -> None:
            async with anyio.create_task_group() as tg:
                sock = c.paths.agent_sock(ATTACKER)
                clients = [await tg.start(_client, sock) for _ in range(CONNECTIONS)]
                flooding.set()
                async with anyio.create_task_group() as floods:
                    for client in clients:
                        floods.start_soon(_flood, client, outcomes)
                done.set()
                tg.cancel_scope.cancel()

        with anyio.fail_after(80):
            async with anyio.create_task_group() as tg:
                tg.start_soon(benign)
                tg.start_soon(attacker)

        assert not failures, failures
        assert len(latencies) >= 20, "the benign agent barely got a call in"
        assert outcomes["remind_ok"] == c.config.remind_max_pending
        assert outcomes["remind_limit_exceeded"] == (
            CONNECTIONS * REMINDS_PER_CONNECTION - c.config.remind_max_pending
        )
        assert outcomes["send_ok"] == CONNECTIONS * SENDS_PER_CONNECTION
        pending = len((await c.store.loose_ends.open([ATTACKER])).reminders)
        assert pending == c.config.remind_max_pending

        # Only the attacker's mail to its parent is new; nobody else's rows moved.
        after = snapshot(c.paths, mine=(ATTACKER, "benign"))
        assert_unchanged(before, after)
        sent = await c.store.messages.outbox(ATTACKER, limit=100_000)
        boss_mail = sum(m.recipient == "boss" for m in sent)
        assert boss_mail == CONNECTIONS * SENDS_PER_CONNECTION // 2

        ms = [x * 1000 for x in latencies]
        p50, p99 = percentile(ms, 0.50), percentile(ms, 0.99)
        report(
            request,
            "flood_benign_latency_ms",
            {"calls": len(ms), "p50": p50, "p99": p99, "max": max(ms)},
            f"benign agent during a {CONNECTIONS}-connection remind+send flood: "
            f"{len(ms)} calls, p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {max(ms):.2f} ms",
        )


async def _client(path: Path, *, task_status: anyio.abc.TaskStatus[RpcClient]) -> None:
    async with connect(path) as client:
        task_status.started(client)
        await anyio.sleep_forever()
