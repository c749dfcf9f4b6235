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


async def test_a_remote_host_holding_no_admin_token_gets_its_agents_forge_identity(
    tmp_path: Path, claude_bin: Path
) -> None:
    """Issue #14: the remote host's hive.toml names the forge's URL only; the coordinator
    provisions the agent's forge user and hands the host that agent's token over the link
    (the forwarded socket), and carries out its create_repo."""
    from hyperhive.forge.identity import TOKEN_FILE, read_token
    from hyperhive.permissions import ToolGroup
    from tests.support.forgejo_server import FakeForgejo
    from tests.support.hive import host_config
    from tests.support.surfaces import result_text, surface_client

    with FakeForgejo() as forgejo:
        forgejo.add_org("agents")
        token_file = tmp_path / "forge-admin-token"
        token_file.write_text(forgejo.admin_token)
        token_file.chmod(0o600)
        seed_home(
            tmp_path,
            {"alice": AgentConfig(tool_groups=[*ToolGroup.AGENT_DEFAULT, ToolGroup.FORGE])},
            hive_toml=f'claude_bin = "{claude_bin}"\ndashboard_port = 0\n'
            '[hostlink]\nlisten = "127.0.0.1:0"\n'
            f'[forge]\nurl = "{forgejo.url}"\nadmin_token_file = "{token_file}"\n'
            "poll_seconds = 60\n",
        )
        paths = HivePaths(tmp_path)
        coord = await Coordinator.open(paths, hive_config(tmp_path))
        async with anyio.create_task_group() as tg:
            await tg.start(coord.run)
            async with operator(paths) as op:
                cred = await add_host(op, "h1", tmp_path / "creds")
                host_paths = HivePaths(tmp_path, tmp_path / "run" / "hosts" / "h1")
                host_hive = host_config(tmp_path)
                assert host_hive.forge is not None and host_hive.forge.admin_token_file is None
                host = AgentHost(
                    host_paths, host_hive, remote=LinkTarget(link_url(paths), "h1", cred)
                )
                await tg.start(host.run)
                await until(lambda: coord.hostlink.host_of("alice") == "h1", 30)
                state = host_paths.agent_state("alice")
                await until(lambda: (state / TOKEN_FILE).exists(), 30)
                token = read_token(state)
                assert token is not None and forgejo.tokens_of("alice")[0].sha1 == token
                async with surface_client(host, "alice", "hyperhive") as hh:
                    made = await hh.call_tool("create_repo", {"name": "from-afar"})
                assert not made.is_error, result_text(made)
                assert forgejo.repos["agents/from-afar"].collaborators == {"alice": "write"}
                with anyio.move_on_after(10):
                    await host.stop_all(graceful=False)
            tg.cancel_scope.cancel()
        assert forgejo.rejected == []
