"""Coordinator failover on PostgreSQL: two ``hivectl serve`` processes, one active, one
standing by; the active one is ``kill -9``ed mid-load and the standby takes over.

The rig is the soak's (``test_soak.py``): agents on the real claude CLI behind
the pid-tagging wrapper, answered by :class:`~tests.chaos.soak_model.SoakModel`,
and the operator sending chains over ``run/host.sock`` the whole time. The
active coordinator is killed twice (each one in turn: the first victim comes
back as the standby), then the hive settles and every message is accounted
for: each send answered ok is stored and delivered, each delivery handled
(acked), and nothing acked is shown to a claude again.

The lease's own refusal — an active coordinator that was frozen past its
lease's expiry wakes up fenced and exits non-zero — runs on two homes sharing
one database, since one home's lock would keep a frozen coordinator's
standby waiting.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from hyperhive.config import AgentConfig, HivePaths
from tests.chaos.rig import ChaosProcs, chaos_wrapper, claude_pids, kill_strays, seed_soak_home
from tests.chaos.soak_model import SoakModel
from tests.chaos.test_soak import PG_PLAN, Operator, Tally, _check_messages, _settle
from tests.e2e.test_up import Up, _coordinator_pid, _finish
from tests.support.hive import SERVE_START_WITHIN_S, seed_home, start_serve
from tests.support.model_server import ModelServer
from tests.support.procs import hivectl, start_host, stop, wait_until
from tests.support.stores import read_hive

log = logging.getLogger(__name__)

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(600)]

SEED = 20261201
TAKEOVER_WITHIN = 60.0  # a bound on the loop, not the promise (10 s, logged per takeover)


def _log(home: Path, name: str) -> str:
    try:
        return (home / name).read_text(errors="replace")
    except FileNotFoundError:
        return ""


def _standing_by(home: Path, name: str) -> None:
    wait_until(lambda: "standing by" in _log(home, name), SERVE_START_WITHIN_S, f"{name} stands by")


def _took_over(home: Path, name: str) -> float:
    """Wait for ``name``'s coordinator to be active and serving; when it was seen so."""
    paths = HivePaths(home)
    from hyperhive.unixsock import is_listening

    wait_until(
        lambda: (
            "coordinator up" in _log(home, name)
            and is_listening(paths.host_sock)
            and is_listening(paths.hosts_sock)
        ),
        TAKEOVER_WITHIN,
        f"{name} takes over",
    )
    return time.monotonic()


def _all_logs(home: Path) -> str:
    return "\n".join(
        f"--- {p.name}\n{p.read_text(errors='replace')[-6000:]}" for p in sorted(home.glob("*.log"))
    )


async def test_a_standby_takes_over_from_a_killed_coordinator_and_nothing_is_lost(
    tmp_path: Path, claude_bin: Path, pg_url: str
) -> None:
    agents = ["a00", "a01", "a02"]
    record = tmp_path / "claude-starts"
    model = SoakModel(agents, SEED)
    home = tmp_path / "hive"
    home.mkdir()
    paths = HivePaths(home)
    procs: list[subprocess.Popen[bytes]] = []
    takeovers: list[float] = []
    tally = Tally(agents=len(agents), store="postgresql")
    try:
        async with ModelServer(model) as server:
            claude = chaos_wrapper(tmp_path, claude_bin, record)
            seed_soak_home(home, agents, server.url, claude, pg_url)
            active = start_serve(home, log_name="serve-1.log")
            standby = start_serve(home, wait=False, log_name="serve-2.log")
            host = start_host(home)
            procs += [active, standby, host]
            await anyio.to_thread.run_sync(_standing_by, home, "serve-2.log")

            operator = Operator(paths, agents, random.Random(SEED), PG_PLAN)
            async with anyio.create_task_group() as tg:
                stop_sending = anyio.Event()
                tg.start_soon(operator.run, stop_sending)
                names = [f"serve-{i}.log" for i in range(1, 5)]
                for kill in range(2):
                    # Mid-load: sends answered and turns running on the current active one.
                    floor = len(operator.confirmed)
                    await anyio.to_thread.run_sync(
                        lambda f=floor: wait_until(  # type: ignore[misc]
                            lambda: len(operator.confirmed) >= f + 4 and model.ledger.turns,
                            120,
                            "load on the active coordinator",
                        )
                    )
                    active.send_signal(signal.SIGKILL)
                    active.wait(timeout=30)
                    killed_at = time.monotonic()
                    # hivectl issued while nobody serves rides the takeover out.
                    status = await anyio.to_thread.run_sync(
                        lambda: hivectl(home, "status", "--json", check=False)
                    )
                    assert status.returncode == 0, status.stderr + _all_logs(home)
                    taken = await anyio.to_thread.run_sync(_took_over, home, names[kill + 1])
                    takeovers.append(round(taken - killed_at, 1))
                    # The killed one comes back, as the standby.
                    active = standby
                    standby = start_serve(home, wait=False, log_name=names[kill + 2])
                    procs.append(standby)
                    await anyio.to_thread.run_sync(_standing_by, home, names[kill + 2])
                floor = len(operator.confirmed)
                await anyio.to_thread.run_sync(
                    lambda: wait_until(
                        lambda: len(operator.confirmed) >= floor + 4, 120, "sends after failover"
                    )
                )
                stop_sending.set()
            rig = ChaosProcs(home, serve=active, host=host)
            await _settle(paths, agents, record, rig, PG_PLAN)
            host.send_signal(signal.SIGTERM)
            assert host.wait(timeout=120) == 0, _all_logs(home)
            for proc in (active, standby):
                proc.send_signal(signal.SIGTERM)
            assert active.wait(timeout=60) == 0, _all_logs(home)
            assert standby.wait(timeout=60) == 0, _all_logs(home)
    finally:
        for proc in procs:
            stop(proc)
        kill_strays(record, home)

    with model.lock:
        ledger = model.ledger
    db = await read_hive(paths)
    problems = _check_messages(db, agents, operator, ledger, claude_pids(record), tally)
    log.warning(
        "failover: takeovers after kill -9 in %s s; %d sends ok, %d not answered ok; %s",
        takeovers,
        len(operator.confirmed),
        operator.failed,
        tally.deliveries_per_message,
    )
    assert len(takeovers) == 2
    assert tally.messages_to_agents >= len(operator.confirmed) > 8
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:60])


async def test_a_frozen_active_coordinator_wakes_up_fenced_and_stops(
    tmp_path: Path, pg_url: str
) -> None:
    homes = [tmp_path / "one", tmp_path / "two"]
    for h in homes:
        h.mkdir()
        seed_home(h, {"alice": AgentConfig()}, hive_toml="dashboard_port = 0\n", store_url=pg_url)
    first = start_serve(homes[0])
    second = start_serve(homes[1], wait=False)
    try:
        await anyio.to_thread.run_sync(_standing_by, homes[1], "serve.log")
        assert "pid" in _log(homes[1], "serve.log").split("standing by:")[1].splitlines()[0]
        first.send_signal(signal.SIGSTOP)  # frozen: it neither renews nor writes
        await anyio.to_thread.run_sync(_took_over, homes[1], "serve.log")
        first.send_signal(signal.SIGCONT)
        code = await anyio.to_thread.run_sync(lambda: first.wait(timeout=60))
        assert code != 0
        assert "lost the coordinator lease (epoch 1)" in _log(homes[0], "serve.log")
        # The new active one serves on: its writes carry epoch 2.
        got = hivectl(homes[1], "send", "alice", "after the takeover", check=False)
        assert got.returncode == 0, got.stderr + _log(homes[1], "serve.log")
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=60) == 0, _log(homes[1], "serve.log")
    finally:
        for proc in (first, second):
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
            stop(proc)


@pytest.mark.sqlite_only
async def test_a_second_serve_on_a_sqlite_home_is_still_refused(tmp_path: Path) -> None:
    seed_home(tmp_path, {"alice": AgentConfig()}, hive_toml="dashboard_port = 0\n")
    first = start_serve(tmp_path)
    try:
        second = hivectl(tmp_path, "serve", check=False)
        assert second.returncode != 0
        assert "already in use" in second.stderr and str(first.pid) in second.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=60)


def test_up_beside_a_standby_serve_survives_its_coordinators_kill_9(
    tmp_path: Path, claude_bin: Path, pg_url: str
) -> None:
    """The documented setup (docs/across-machines.md): ``hivectl up``, and a second
    ``serve`` on the same home."""
    home = tmp_path
    seed_home(
        home, {}, hive_toml=f'claude_bin = "{claude_bin}"\ndashboard_port = 0\n', store_url=pg_url
    )
    up = Up(home)
    standby: subprocess.Popen[bytes] | None = None
    try:
        up.wait_for(lambda: up.saw("agent queen: up"), 120)
        first = up.wait_for(lambda: _coordinator_pid(home))
        standby = start_serve(home, wait=False, log_name="standby.log")
        _standing_by(home, "standby.log")
        os.kill(first, signal.SIGKILL)
        _took_over(home, "standby.log")
        # up restarts its coordinator, which now stands by for the other one.
        up.wait_for(lambda: up.saw("coordinator exited"), 60)
        wait_until(
            lambda: "standing by" in _log(home, "logs/coordinator.log").split("coordinator up")[-1],
            60,
            "up's coordinator stands by",
        )
        up.wait_for(lambda: any(a["name"] == "queen" and a["running"] for a in up.agents()), 90)
        up.proc.send_signal(signal.SIGINT)
        assert up.proc.wait(timeout=120) == 0, up.lines
        standby.send_signal(signal.SIGTERM)
        assert standby.wait(timeout=60) == 0, _log(home, "standby.log")
    finally:
        _finish(up)
        if standby is not None:
            stop(standby)
