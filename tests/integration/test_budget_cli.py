"""``hivectl budget`` / ``hivectl spend`` against a real ``hivectl serve``, and spend that
survives ``kill -9``: every run counted exactly once, however often its report is resent."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import anyio
import pytest

from hyperhive.client import connect
from hyperhive.config import AgentConfig, HivePaths
from hyperhive.errors import HiveError, Unavailable
from hyperhive.protocol import RunSpend, TurnEndReq
from tests.support.hive import seed_home, start_serve
from tests.support.procs import hivectl, hivectl_json
from tests.support.spend import reported

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(360)]

RUNS = 60
KILLS = 2


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=20)


def test_budget_and_spend_commands(tmp_path: Path) -> None:
    seed_home(tmp_path, {"alice": "budget = { usd_per_day = 2.0 }\n", "bob": AgentConfig()})
    proc = start_serve(tmp_path)
    try:
        shown = hivectl_json(tmp_path, "budget")
        alice = next(s for s in shown["scopes"] if s["scope"] == "alice")
        assert alice["configured"]["usd_per_day"] == 2.0 and alice["overrides"] == {}

        changed = hivectl_json(tmp_path, "budget", "set", "alice", "--usd-per-day", "5")
        alice = next(s for s in changed["scopes"] if s["scope"] == "alice")
        assert alice["effective"]["usd_per_day"] == 5.0
        hivectl(tmp_path, "budget", "set", "--hive", "--tokens-total", "1000000")
        human = hivectl(tmp_path, "budget").stdout
        assert "hive (all)" in human and "1,000,000*" in human and "$5.00*" in human

        usage = hivectl(tmp_path, "budget", "set", "--usd-total", "1", check=False)
        assert usage.returncode == 2 and "name one AGENT or pass --hive" in usage.stderr
        negative = hivectl(tmp_path, "budget", "set", "bob", "--usd-total", "-3", check=False)
        assert negative.returncode == 2 and "cannot be negative" in negative.stderr
        ghost = hivectl(tmp_path, "budget", "set", "ghost", "--usd-total", "1", check=False)
        assert ghost.returncode == 1 and ghost.stderr.startswith("hivectl: ")
        assert "ghost" in ghost.stderr and len(ghost.stderr.strip().splitlines()) == 1

        spend = hivectl_json(tmp_path, "spend")
        assert [r["agent"] for r in spend["agents"]] == ["alice", "bob"]
        assert spend["total"]["all_time"] == {"usd": 0.0, "tokens": 0}
        assert "top spenders: none yet" in hivectl(tmp_path, "spend").stdout

        # Over its limit, the agent says so wherever agents are listed.
        anyio.run(_turn_end, HivePaths(tmp_path), "bob", 0.75)
        anyio.run(_turn_end, HivePaths(tmp_path), "alice", 6.0)
        listed = hivectl(tmp_path, "agents", "list").stdout
        row = next(line for line in listed.splitlines() if line.startswith("alice"))
        assert "over budget" in row
        assert "alice is over budget (alice: $6.00 of its $5.00 daily limit)" in listed
        assert "over budget" in hivectl(tmp_path, "agents", "tree").stdout
        shown = hivectl(tmp_path, "spend").stdout
        assert "top spenders: alice, bob" in shown and "OVER BUDGET" in shown
        spend = hivectl_json(tmp_path, "spend")
        assert spend["total"]["today"] == {"usd": 6.75, "tokens": 0}
    finally:
        _stop(proc)

    # Run-time limits are kept in the store: a restarted coordinator has them.
    proc = start_serve(tmp_path)
    try:
        alice = next(s for s in hivectl_json(tmp_path, "budget")["scopes"] if s["scope"] == "alice")
        assert alice["overrides"] == {"usd_per_day": 5.0}
        reset = hivectl_json(tmp_path, "budget", "set", "alice", "--reset")
        alice = next(s for s in reset["scopes"] if s["scope"] == "alice")
        assert alice["overrides"] == {} and alice["effective"]["usd_per_day"] == 2.0
    finally:
        _stop(proc)


async def _turn_end(paths: HivePaths, agent: str, usd: float) -> None:
    async with connect(paths.agent_sock(agent)) as client:
        await client.call(
            TurnEndReq(
                cmd="turn_end",
                outcome="ok",
                spend=RunSpend.model_validate(reported(usd)),
            )
        )


async def _reporter(
    paths: HivePaths,
    runs: list[TurnEndReq],
    answered: list[int],
    milestones: dict[int, anyio.Event],
) -> None:
    """The harness's rule: resend a turn_end until it is answered, then the next."""
    i = 0
    while i < len(runs):
        try:
            async with connect(paths.agent_sock("alice")) as client:
                while i < len(runs):
                    await client.call(runs[i])
                    answered.append(i)
                    i += 1
                    if i in milestones:
                        milestones[i].set()
        except (Unavailable, OSError, HiveError):
            await anyio.sleep(0.02)  # the coordinator is restarting: resend run i


@pytest.mark.slow
async def test_kill_9_mid_run_keeps_spend_totals_exact(tmp_path: Path) -> None:
    paths = seed_home(tmp_path, {"alice": AgentConfig()})
    # One claude session resumed RUNS times: each report is the session's total so far,
    # and the coordinator counts each run's difference, once, however often it is resent.
    runs = [
        TurnEndReq(
            cmd="turn_end",
            outcome="ok",
            spend=RunSpend.model_validate(
                reported(
                    sum(0.015625 * (m % 7) for m in range(n + 1)),
                    sum(m + 1 for m in range(n + 1)),
                    session="one-session",
                )
            ),
        )
        for n in range(RUNS)
    ]
    proc = start_serve(tmp_path)
    answered: list[int] = []
    milestones = {(k + 1) * RUNS // (KILLS + 1): anyio.Event() for k in range(KILLS)}
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_reporter, paths, runs, answered, milestones)
            for reached in milestones.values():
                await reached.wait()
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                proc = await anyio.to_thread.run_sync(start_serve, tmp_path)
    finally:
        _stop(proc)
    assert answered == list(range(RUNS))
    proc = start_serve(tmp_path)
    try:
        report = await anyio.to_thread.run_sync(lambda: hivectl_json(tmp_path, "spend"))
    finally:
        _stop(proc)
    alice = next(r for r in report["agents"] if r["agent"] == "alice")
    want_usd = sum(0.015625 * (n % 7) for n in range(RUNS))  # exact in binary floating point
    assert alice["all_time"] == {"usd": want_usd, "tokens": sum(range(1, RUNS + 1))}
    assert json.dumps(report["total"]["all_time"]) == json.dumps(alice["all_time"])
