"""The host keeps an agent's own get_agent_meta; every change still shows in the next call.

Real coordinator and host (in process, real sockets); the MCP calls go through
the host's surface as claude's would. A status set behind the surface's back
(on the agent socket, as a bash task can) and a reparent by the operator
reach the host as pushes, and the very next call shows them.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.config import AgentConfig, HivePaths
from hyperhive.core.hostlink import META_FORGET_WITHIN
from hyperhive.protocol import OpAgentsReq
from tests.support.hive import (
    SERVE_START_WITHIN_S,
    agent,
    agent_call,
    coordinator,
    op_call,
    operator,
    running_hive,
    seed_home,
)
from tests.support.procs import start_host, stop
from tests.support.surfaces import result_text, surface_client, until, until_async

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(240)]


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
        await until(lambda: {"alice", "bob"} <= set(host.agents))
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

            # A reparent by the operator (answered once the host has taken the new place).
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


def _unsandboxed(home: Path, claude_bin: Path) -> None:
    (home / "hive.toml").write_text(f'claude_bin = "{claude_bin}"\nruntime = "unsandboxed"\n')


async def _until_running(paths: HivePaths, name: str) -> None:
    async def running() -> bool:
        async with operator(paths) as op:
            rows = await op.call(OpAgentsReq(cmd="agents"))
        return any(r.name == name and r.running for r in rows)

    await until_async(running, within=SERVE_START_WITHIN_S)


async def test_a_status_reply_waits_for_the_host_to_drop_its_kept_meta(
    tmp_path: Path, claude_bin: Path
) -> None:
    """The agent's next MCP call reaches the host by another connection than the
    coordinator's push, so it could overtake a push: the coordinator answers a
    set_status only once the host has acknowledged dropping the kept meta.

    The host is a real process, stopped (SIGSTOP) while the status is set: the
    reply must come only after it runs again. Kept stopped past the bound, the
    reply still comes (the status is stored; the wait is bounded).
    """
    seed_home(tmp_path, {"alice": AgentConfig()})
    _unsandboxed(tmp_path, claude_bin)
    async with coordinator(tmp_path) as c:
        host = start_host(tmp_path)
        try:
            await _until_running(c.paths, "alice")
            async with agent(c.paths, "alice") as sock:
                await agent_call(sock, "set_status", text="warm")  # link and push path live
                replied = anyio.Event()

                async def set_status(text: str) -> None:
                    await agent_call(sock, "set_status", text=text)
                    replied.set()

                async with anyio.create_task_group() as tg:
                    os.kill(host.pid, signal.SIGSTOP)
                    try:
                        tg.start_soon(set_status, "held")
                        with anyio.move_on_after(1.0):  # under the bound (5 s)
                            await replied.wait()
                    finally:
                        os.kill(host.pid, signal.SIGCONT)
                    assert not replied.is_set(), "answered while the host could not have acked"
                    with anyio.fail_after(30):
                        await replied.wait()

                replied = anyio.Event()
                os.kill(host.pid, signal.SIGSTOP)
                try:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(set_status, "unacked")
                        with anyio.fail_after(META_FORGET_WITHIN + 30):
                            await replied.wait()  # the bound, not the host, ends the wait
                finally:
                    os.kill(host.pid, signal.SIGCONT)
                shown = await agent_call(sock, "get_agent_meta")
                assert isinstance(shown, dict) and shown["status_text"] == "unacked"
        finally:
            stop(host)
