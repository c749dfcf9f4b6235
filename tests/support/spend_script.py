"""A scripted model whose replies carry usage that pushes an agent over a token budget.

The budgets and feed e2e tests share it: an operator's ``ping-N`` costs a
``BIG`` turn (the agent answers ``pong-N`` to the operator), a subagent reaches
its goal for ``SUB``, everything else is a cheap ``noted``.
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.model_server import Answer, Usage, text, tool_call
from tests.support.surfaces import result_text, surface_client

__all__ = ["BIG", "GOAL", "SMALL", "SUB", "spending", "start_scout"]

GOAL = "mcp__subagent_control__goal_reached"
BIG = Usage(input_tokens=4000, output_tokens=40)
SUB = Usage(input_tokens=300, output_tokens=7)
SMALL = Usage(input_tokens=10, output_tokens=1)


def spending(body: dict[str, Any]) -> Answer:
    """The model server's script (``ModelServer.set_script``)."""
    tools = [t["name"] for t in body.get("tools") or []]
    if GOAL in tools:
        return text("SUBAGENT DONE", SUB)
    users = [m for m in body["messages"] if m.get("role") == "user"]
    last = json.dumps(users[-1]) if users else ""
    if '"tool_result"' in last:
        return text("done", SMALL)
    for word in ("ping-1", "ping-2"):
        if word in last:
            return tool_call(
                "mcp__hyperhive__send",
                {"to": "operator", "body": word.replace("ping", "pong")},
                BIG,
            )
    return text("noted", SMALL)


async def start_scout(host: Any, agent: str) -> None:
    """Start ``agent``'s subagent ``scout`` through its subagent surface."""
    async with surface_client(host, agent, "subagent") as sub:
        started = await sub.call_tool("start", {"prompt": "look around", "name": "scout"})
        assert result_text(started).startswith("subagent started: id=scout"), started
