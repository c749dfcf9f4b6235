"""``remind`` payloads are held to a stated limit, refused past it in words, and the
tool's description states it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperhive.agent.hyperhive_tools import hyperhive_surface
from hyperhive.config import AgentConfig
from hyperhive.errors import LimitExceeded
from hyperhive.protocol.agent import REMIND_MAX_BYTES
from tests.support.hive import agent, agent_call, coordinator, seed_home


@pytest.mark.anyio
async def test_a_reminder_past_the_limit_is_refused_and_nothing_is_stored(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    seed_home(tmp_path, {"bob": AgentConfig()}, {"bob": None}, store_url=hive_store_url)
    async with coordinator(tmp_path) as c, agent(c.paths, "bob") as bob:
        fits = "x" * REMIND_MAX_BYTES
        await agent_call(bob, "remind", message=fits, delay_seconds=3600)
        for too_big in ("x" * (REMIND_MAX_BYTES + 1), "é" * (REMIND_MAX_BYTES // 2 + 1)):
            # The second is fewer characters than the limit but more bytes.
            with pytest.raises(LimitExceeded, match=r"at most 65536 bytes \(64 KiB\)"):
                await agent_call(bob, "remind", message=too_big, delay_seconds=3600)
        ends = await agent_call(bob, "get_loose_ends")
        assert isinstance(ends, list) and len(ends) == 1


def test_the_remind_tool_states_the_limit() -> None:
    remind = hyperhive_surface(lambda name: None).describe("remind")
    schema = remind.input_schema
    assert "64 KiB" in schema["properties"]["message"]["description"]
