"""A remote agent host on loopback, in-process: the network link end to end, quickly.

The coordinator serves ``[hostlink]`` on 127.0.0.1 (plain TCP is allowed on
loopback); an ``AgentHost`` dials it with a credential from ``hosts add``,
serves its agents' sockets in a run dir of its own, and forwards their frames.
The real claude CLI runs each turn against the scripted model server.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from hyperhive.agent.host import AgentHost
from hyperhive.client import connect
from hyperhive.config import AgentConfig, HivePaths
from hyperhive.core.coordinator import Coordinator
from hyperhive.netlink.dialer import LinkTarget
from hyperhive.protocol import OpInboxReq, OpSendReq
from tests.support.hive import agent_call, agent_env, hive_config, operator, seed_home
from tests.support.hostlink import add_host, link_url
from tests.support.model_server import ModelServer, text, tool_call
from tests.support.surfaces import until, until_async

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(150)]


async def test_a_remote_hosts_agent_answers_through_its_forwarded_socket(
    tmp_path: Path,
    model_server: ModelServer,
    claude_bin: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    model_server.set_script(
        [tool_call("mcp__hyperhive__send", {"to": "operator", "body": "pong"}), text("done")]
    )
    seed_home(
        tmp_path,
        {"alice": AgentConfig(env=agent_env(model_server.url))},
        hive_toml=f'claude_bin = "{claude_bin}"\ndashboard_port = 0\n'
        '[hostlink]\nlisten = "127.0.0.1:0"\n',
    )
    paths = HivePaths(tmp_path)
    hive = hive_config(tmp_path)
    coord = await Coordinator.open(paths, hive)
    async with anyio.create_task_group() as tg:
        await tg.start(coord.run)
        async with operator(paths) as op:
            cred = await add_host(op, "h1", tmp_path / "creds")
            host_paths = HivePaths(tmp_path, tmp_path / "run" / "hosts" / "h1")
            host = AgentHost(host_paths, hive, remote=LinkTarget(link_url(paths), "h1", cred))
            await tg.start(host.run)
            await until(lambda: coord.hostlink.host_of("alice") == "h1", 30)
            # The host serves alice's socket itself, in its own run dir.
            await until(lambda: host_paths.agent_sock("alice").exists(), 30)
            await op.call(OpSendReq(cmd="send", to="alice", body="ping"))

            async def replies() -> list[str]:
                box = await op.call(OpInboxReq(cmd="inbox"))
                return [m.body for m in box if m.sender == "alice"]

            assert await until_async(replies, 90) == ["pong"]
            assert "from operator: ping" in str(model_server.main_requests[0].messages)
            # A status set on the forwarded socket: the remote host acknowledges dropping
            # its kept meta over the network link before the reply (not the bound).
            async with connect(host_paths.agent_sock("alice")) as sock:
                await agent_call(sock, "set_status", text="remote")
                shown = await agent_call(sock, "get_agent_meta")
            assert isinstance(shown, dict) and shown["status_text"] == "remote"
            assert not [r for r in caplog.records if "old meta" in r.getMessage()]
            with anyio.move_on_after(10):
                await host.stop_all(graceful=False)
        tg.cancel_scope.cancel()
