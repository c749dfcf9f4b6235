"""An agent's extra MCP servers under ``--print``: a real claude turn calls their tools.

claude in ``--print`` refuses a tool that is not in ``--allowedTools``, so a
declared server must reach that list (``allowed_tools``, default ``["*"]``);
one gated behind a tool group is offered only to an agent holding the group.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.config import AgentConfig, McpServer
from hyperhive.permissions import ToolGroup
from tests.support.hive import agent_env, op_call, operator, running_hive, seed_home
from tests.support.model_server import ModelServer, RecordedRequest, text, tool_call
from tests.support.surfaces import until

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(120)]

ECHO_SERVER = Path(__file__).resolve().parents[1] / "support" / "echo_mcp.py"


def _echo(**fields: Any) -> McpServer:
    return McpServer(type="stdio", command=sys.executable, args=[str(ECHO_SERVER)], **fields)


def _tool_results(request: RecordedRequest) -> list[dict[str, Any]]:
    return [
        block
        for message in request.messages
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


async def _one_turn(
    tmp_path: Path, model: ModelServer, claude_bin: Path, cfg: AgentConfig, requests: int
) -> None:
    """Seed alice with ``cfg``, wake her with a message, wait for ``requests`` model calls."""
    seed_home(tmp_path, {"alice": cfg.model_copy(update={"env": agent_env(model.url)})})
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        async with operator(c.paths) as op:
            await op_call(op, "send", to="alice", body="use your echo tool")
        await anyio.to_thread.run_sync(
            lambda: model.wait_for(lambda reqs: sum(r.main for r in reqs) >= requests, 60)
        )


async def test_a_turn_calls_a_tool_of_an_extra_stdio_server(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    model_server.set_script(
        [tool_call("mcp__echo__echo", {"text": "hello from the hive"}), text("done")]
    )
    cfg = AgentConfig(mcp_servers={"echo": _echo()})
    await _one_turn(tmp_path, model_server, claude_bin, cfg, requests=2)
    first, second = model_server.main_requests[:2]
    assert "mcp__echo__echo" in first.tool_names
    results = _tool_results(second)
    assert len(results) == 1
    assert results[0].get("is_error") is not True, results[0]
    assert "hello from the hive" in json.dumps(results[0]["content"])


async def test_a_server_gated_behind_a_group_the_agent_lacks_is_not_offered(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    model_server.set_script([text("nothing to do")])
    cfg = AgentConfig(
        tool_groups=list(ToolGroup.AGENT_DEFAULT),
        mcp_servers={"echo": _echo(tool_group=ToolGroup.WEB_TOOLS)},
    )
    await _one_turn(tmp_path, model_server, claude_bin, cfg, requests=1)
    offered = model_server.main_requests[0].tool_names
    assert "mcp__hyperhive__send" in offered
    assert not [t for t in offered if t.startswith("mcp__echo__")]
