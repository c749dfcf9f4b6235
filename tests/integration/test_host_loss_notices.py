"""A host that dies tells each manager once, listing its agents: not a notice per agent.

A real coordinator; the host is a real connection on the local host socket
(registering, activated, then gone without a goodbye, as a killed ``hivectl
host`` is), twice. Each manager's inbox is counted against what it must hold.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hyperhive.client import connect
from hyperhive.config import AgentConfig
from hyperhive.permissions import ToolGroup
from hyperhive.protocol import LinkRegisterReq, Mailbox, OpMessagesReq
from tests.support.hive import coordinator, operator, seed_home
from tests.support.surfaces import until, until_async

pytestmark = pytest.mark.anyio

MANAGER = AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))
AGENTS = {
    "queen": MANAGER,
    "w1": AgentConfig(),
    "w2": AgentConfig(),
    "w3": AgentConfig(),
    "mgr": MANAGER,  # has approvals: it hears of its own children
    "x1": AgentConfig(),
    "x2": AgentConfig(),
}
TREE = {"queen": None, "w1": "queen", "w2": "queen", "w3": "queen", "mgr": "queen"}
TREE |= {"x1": "mgr", "x2": "mgr"}


async def _notices(op: Any, agent: str) -> list[str]:
    box = await op.call(OpMessagesReq(cmd="messages", agent=agent))
    assert isinstance(box, Mailbox)
    return [m.body for m in box.inbox if m.sender == "system" and "[host_lost]" in m.body]


async def test_a_dead_host_is_one_notice_per_manager_listing_its_agents(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    seed_home(tmp_path, AGENTS, TREE, store_url=hive_store_url)
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        for rounds in (1, 2):  # the host comes back and dies again: a notice each time
            activated: set[str] = set()

            def on_push(frame: dict[str, Any], seen: set[str] = activated) -> None:
                if frame.get("cmd") == "activate":
                    seen.add(frame["agent"])

            async with connect(c.paths.hosts_sock, on_push=on_push) as host:
                await host.call(LinkRegisterReq(cmd="register", host_id="h1"))
                await until(lambda seen=activated: seen == set(AGENTS), 10)
            # Gone without a goodbye: every agent stopped with it.
            await until(lambda: not c.hostlink.hosts, 10)
            queen = await until_count(op, "queen", rounds)
            mgr = await until_count(op, "mgr", rounds)
            assert len(queen) == rounds and len(mgr) == rounds
            # queen hears of her own three and of mgr; mgr of its two: each once.
            assert queen[-1].startswith("[host_lost] Agent host h1 stopped, and with it ")
            assert "and with it mgr, w1, w2, w3." in queen[-1] and "x1" not in queen[-1]
            assert "x1, x2." in mgr[-1] and "w1" not in mgr[-1]
        # Nobody else was told anything: the children have no host notices.
        for child in ("w1", "w2", "w3", "x1", "x2"):
            assert await _notices(op, child) == []


async def until_count(op: Any, agent: str, count: int) -> list[str]:
    """``agent``'s host notices, once there are at least ``count``."""

    async def enough() -> list[str] | None:
        found = await _notices(op, agent)
        return found if len(found) >= count else None

    found: list[str] = await until_async(enough, 10)
    return found
