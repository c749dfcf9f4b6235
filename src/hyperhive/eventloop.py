"""The event loop the hive's long-running processes run on, and how they name it."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["UVLOOP", "loop_name"]

# ``hivectl serve`` and ``hivectl host`` run on uvloop (anyio's backend option): the
# broker path (a frame in, a store operation, a reply out) costs about a third less
# event-loop CPU than on asyncio's own loop, and a host's MCP call about a seventh less
# (bench coordinator.sends, agent_host.mcp).
UVLOOP: dict[str, Any] = {"use_uvloop": True}


def loop_name() -> str:
    """``uvloop`` or ``asyncio``: the running loop's package, for the start-up log line."""
    return type(asyncio.get_running_loop()).__module__.split(".")[0]
