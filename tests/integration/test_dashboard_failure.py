"""A dashboard that cannot start does not take the broker down with it.

Seen in the full-disk chaos test: the disk filled while the dashboard was still being
imported, its token file could not be written, and the whole coordinator exited.
"""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest

from hyperhive.config import AgentConfig, HivePaths
from hyperhive.core.coordinator import Coordinator
from tests.support.hive import agent, agent_call, hive_config, op_call, operator, seed_home

pytestmark = pytest.mark.anyio


async def test_a_dashboard_that_cannot_write_its_token_leaves_the_sockets_serving(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    paths: HivePaths = seed_home(
        tmp_path, {"alice": AgentConfig()}, hive_toml="dashboard_port = 0\n"
    )
    paths.run.mkdir(parents=True, exist_ok=True)
    (paths.run / "dashboard-token").mkdir()  # where the token file goes: it cannot be read
    coord = await Coordinator.open(paths, hive_config(tmp_path))
    with caplog.at_level(logging.ERROR, logger="hyperhive.core.coordinator"):
        async with anyio.create_task_group() as tg:
            await tg.start(lambda task_status: coord.run(dashboard=True, task_status=task_status))
            async with operator(paths) as op:
                sent = await op_call(op, "send", to="alice", body="still here")
            async with agent(paths, "alice") as alice:
                got = await agent_call(alice, "recv", max=5)
            tg.cancel_scope.cancel()
    assert isinstance(sent, dict) and isinstance(got, list)
    assert [m["body"] for m in got if isinstance(m, dict)] == ["still here"]
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("dashboard not started" in e and "dashboard-token" in e for e in errors), errors
    assert not (paths.run / "dashboard.json").exists()
