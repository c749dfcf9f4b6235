"""A hive that only starts its agents and stops: the PostgreSQL pass's reference.

What these two tests run of the store is what every hive's start runs; CI runs
again on PostgreSQL the tests that run more of it (``tests/support/store_reach.py``).
They check the start itself: every agent placed on the host, running and idle.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from hyperhive.config import AgentConfig, HivePaths
from hyperhive.protocol import AgentView, OpAgentsReq
from tests.support.hive import operator, running_hive, seed_home, start_serve
from tests.support.procs import agent_rows, start_host, stop, wait_until
from tests.support.surfaces import until_async

pytestmark = pytest.mark.anyio

AGENTS = {"queen": AgentConfig(), "worker": AgentConfig()}
TOPOLOGY = {"queen": None, "worker": "queen"}


async def test_a_hive_starts_its_agents_and_stops(tmp_path: Path, claude_bin: Path) -> None:
    seed_home(tmp_path, AGENTS, topology=TOPOLOGY)
    async with running_hive(tmp_path, claude_bin) as (coord, _host), operator(coord.paths) as op:

        async def all_running() -> list[AgentView] | None:
            rows = await op.call(OpAgentsReq(cmd="agents"))
            return rows if rows and all(r.running for r in rows) else None

        rows = await until_async(all_running, 60)
        assert {(r.name, r.parent, r.host, r.turn_state) for r in rows} == {
            ("queen", None, "test-host", "idle"),
            ("worker", "queen", "test-host", "idle"),
        }


def test_serve_and_host_start_and_stop_as_processes(tmp_path: Path, claude_bin: Path) -> None:
    seed_home(
        tmp_path,
        AGENTS,
        topology=TOPOLOGY,
        hive_toml=f'claude_bin = "{claude_bin}"\ndashboard_port = 0\n',
    )
    serve = start_serve(tmp_path)
    host = start_host(tmp_path)
    try:
        rows = wait_until(
            lambda: (
                (rows := agent_rows(tmp_path)) and all(r["running"] for r in rows.values()) and rows
            ),
            60,
            "both agents running",
        )
        assert sorted(rows) == ["queen", "worker"]
        assert {r["turn_state"] for r in rows.values()} == {"idle"}
        for proc in (host, serve):  # the host says goodbye first, as `up` stops them
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0, (tmp_path / "serve.log").read_text()
        assert not HivePaths(tmp_path).host_sock.exists()
    finally:
        for proc in (host, serve):
            stop(proc)
