"""The host keeps an agent's own get_agent_meta; every change still shows in the next call.

Real coordinator and host (in process, real sockets); the MCP calls go through
the host's surface as claude's would. A status set behind the surface's back
(on the agent socket, as a bash task can) and a reparent by the operator
reach the host as pushes, and the very next call shows them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hyperhive.config import AgentConfig
from tests.support.hive import agent, agent_call, op_call, operator, running_hive, seed_home
from tests.support.surfaces import result_text, surface_client, until

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(90)]


async def meta(client: Any, **args: Any) -> dict[str, Any]:
    result = await client.call_tool("get_agent_meta", args)
    assert not result.is_error, result_text(result)
    shown: dict[str, Any] = json.loads(result_text(result))
    return shown


async def test_the_next_call_sees_every_change_to_the_agents_own_meta(
    tmp_path: Path, claude_bin: Path
) -> None:
    seed_home(tmp_path, {"alice": AgentConfig(), "bob": AgentConfig()})
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: {"alice", "bob"} <= set(host.runtimes))
        async with surface_client(host, "alice", "hyperhive") as mcp:
            first = await meta(mcp)
            assert (first["name"], first["parent"], first["status_text"]) == ("alice", None, "")
            assert first["running"] is True
            assert await meta(mcp) == first  # kept: nothing changed

            # Through the surface.
            await mcp.call_tool("set_status", {"text": "reading the spec"})
            assert (await meta(mcp))["status_text"] == "reading the spec"

            # Behind the surface's back: the agent socket, as a bash task can.
            async with agent(c.paths, "alice") as sock:
                await agent_call(sock, "set_status", text="writing tests")
            shown = await meta(mcp)
            assert shown["status_text"] == "writing tests"
            assert shown["status_set_at"] is not None

            # A reparent by the operator.
            async with operator(c.paths) as op:
                await op_call(op, "set_parent", child="alice", new_parent="bob")
            assert (await meta(mcp))["parent"] == "bob"
            async with operator(c.paths) as op:
                await op_call(op, "set_parent", child="alice", new_parent=None)
            assert (await meta(mcp))["parent"] is None

            # Another agent's meta is the coordinator's, never a kept copy of alice's.
            async with surface_client(host, "bob", "hyperhive") as bob_mcp:
                await bob_mcp.call_tool("set_status", {"text": "bob here"})
            other = await meta(mcp, name="bob")
            assert (other["name"], other["status_text"]) == ("bob", "bob here")
            assert (await meta(mcp))["name"] == "alice"
