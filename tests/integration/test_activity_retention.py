"""The activity log is bounded by age: ``activity_keep_days`` in hive.toml, pruned by
the coordinator when it starts and hourly after."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hyperhive.config import AgentConfig, HivePaths
from tests.support.hive import coordinator, seed_home
from tests.support.stores import open_hive_store
from tests.support.surfaces import until_async

pytestmark = pytest.mark.anyio


async def test_the_coordinator_drops_events_older_than_the_keep_days(tmp_path: Path) -> None:
    seed_home(tmp_path, {"alice": AgentConfig()}, hive_toml="activity_keep_days = 2\n")
    now = time.time()
    store = await open_hive_store(HivePaths(tmp_path))
    try:
        for days in (10, 3, 1, 0):
            await store.activity.record("turn", "alice", f"{days} days ago", at=now - days * 86400)
    finally:
        await store.close()
    async with coordinator(tmp_path) as c:

        async def kept() -> list[str]:
            titles = [r.title for r in await c.store.activity.page(limit=10)]
            return titles if len(titles) == 2 else []

        assert await until_async(kept) == ["0 days ago", "1 days ago"]
        assert c.config.activity_keep_days == 2
        # The pruning itself, once more with a clock of our choosing: a day on, one more goes.
        assert await c.agent_state.activity.prune_once(2, now=now + 86400 + 60) == 1
