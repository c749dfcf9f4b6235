"""Issue #14: agents' forge identities come from the coordinator; hosts hold no admin token.

A real coordinator (holding the forge's admin token) and a real agent host
whose hive.toml names no admin token, or one its process cannot read; the
scripted Forgejo. No claude turn runs here: identities are provisioned when
an agent is activated, and ``create_repo`` is called through the host's real
MCP surface. The e2e suites (forge, Matrix) run their hosts the same way
(``tests.support.hive.host_config``).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx
import pytest

from hyperhive.agent.host import AgentHost
from hyperhive.config import AgentConfig, HiveConfig, HivePaths
from hyperhive.core.coordinator import Coordinator
from hyperhive.errors import ConfigError, PermissionDenied, ToolGroupDenied
from hyperhive.forge.identity import TOKEN_FILE, read_token
from hyperhive.matrix.config import AgentMatrixConfig
from hyperhive.permissions import ToolGroup
from tests.support.forgejo_server import FakeForgejo
from tests.support.hive import (
    agent,
    agent_call,
    coordinator,
    hive_config,
    host_config,
    seed_home,
)
from tests.support.surfaces import result_text, surface_client, until
from tests.support.synapse import Synapse

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

FORGER, PLAIN = "idc-fay", "idc-gus"


@pytest.fixture
def forgejo() -> Iterator[FakeForgejo]:
    with FakeForgejo() as server:
        server.add_org("agents")
        yield server
        assert server.rejected == []


def _seed(home: Path, forgejo: FakeForgejo, claude_bin: Path) -> None:
    token_file = home / "forge-admin-token"
    home.mkdir(parents=True, exist_ok=True)
    token_file.write_text(forgejo.admin_token)
    token_file.chmod(0o600)
    seed_home(
        home,
        {
            FORGER: AgentConfig(tool_groups=[*ToolGroup.AGENT_DEFAULT, ToolGroup.FORGE]),
            PLAIN: AgentConfig(),
        },
        hive_toml=f'claude_bin = "{claude_bin}"\n[forge]\nurl = "{forgejo.url}"\n'
        f'admin_token_file = "{token_file}"\npoll_seconds = 60\n',
    )


def _host_hive(home: Path, how: str) -> HiveConfig:
    if how == "absent":  # a remote host's hive.toml: [forge] url only
        hive = host_config(home)
    else:  # names a token file this host's process cannot read (another machine's path)
        hive = hive_config(home)
        assert hive.forge is not None
        unreadable = home / "not-on-this-machine" / "forge-admin-token"
        hive = hive.model_copy(
            update={"forge": hive.forge.model_copy(update={"admin_token_file": unreadable})}
        )
    assert hive.forge is not None
    return hive


@asynccontextmanager
async def _hive(home: Path, host_hive: HiveConfig) -> AsyncIterator[tuple[Coordinator, AgentHost]]:
    paths = HivePaths(home)
    coord = await Coordinator.open(paths, hive_config(home))
    host = AgentHost(paths, host_hive, host_id="idc-host")
    async with anyio.create_task_group() as tg:
        await tg.start(coord.run)
        await tg.start(host.run)
        try:
            yield coord, host
        finally:
            with anyio.move_on_after(10):
                await host.stop_all(graceful=False)
            tg.cancel_scope.cancel()


@pytest.mark.parametrize("how", ["absent", "unreadable"])
async def test_a_host_without_the_admin_token_gets_its_agents_forge_identity(
    tmp_path: Path, forgejo: FakeForgejo, claude_bin: Path, how: str
) -> None:
    _seed(tmp_path, forgejo, claude_bin)
    async with _hive(tmp_path, _host_hive(tmp_path, how)) as (_coord, host):
        await until(lambda: FORGER in host.agents)
        rt = host.agents[FORGER]
        assert rt.forge is not None and rt.forge_problem is None
        # Provisioned at activation, by the coordinator: the agent's own token, in its state.
        await until(lambda: (rt.state_dir / TOKEN_FILE).exists())
        token = read_token(rt.state_dir)
        assert token is not None and [t.sha1 for t in forgejo.tokens_of(FORGER)] == [token]
        assert (rt.state_dir / TOKEN_FILE).stat().st_mode & 0o777 == 0o600
        assert token != forgejo.admin_token

        # create_repo through the host's real MCP surface: the coordinator makes it.
        async with surface_client(host, FORGER, "hyperhive") as hh:
            made = await hh.call_tool("create_repo", {"name": "via-coord", "private": True})
        text = result_text(made)
        assert not made.is_error, text
        assert f"clone: {forgejo.url}/agents/via-coord.git" in text
        assert forgejo.repos["agents/via-coord"].collaborators == {FORGER: "write"}

        # The forge revoked the token (the operator, in its UI): the host gets a new one.
        del forgejo.tokens[token]
        fresh = await rt.forge.reissue(token)
        assert fresh != token and [t.sha1 for t in forgejo.tokens_of(FORGER)] == [fresh]
        assert read_token(rt.state_dir) == fresh

        # The admin token is nowhere in the agents' directories.
        leaks = [
            p
            for p in (tmp_path / "agents").rglob("*")
            if p.is_file() and forgejo.admin_token.encode() in p.read_bytes()
        ]
        assert leaks == []


async def test_an_agent_without_the_group_or_matrix_gets_no_identity(
    tmp_path: Path, forgejo: FakeForgejo, claude_bin: Path
) -> None:
    """The coordinator checks the asking agent's applied config, whatever asks: its
    host, or a process in its sandbox on the same socket."""
    _seed(tmp_path, forgejo, claude_bin)
    async with _hive(tmp_path, host_config(tmp_path)) as (coord, host):
        await until(lambda: PLAIN in host.agents)
        async with agent(coord.paths, PLAIN) as sock:
            with pytest.raises(ToolGroupDenied, match="'forge' tool group"):
                await agent_call(sock, "forge_token")
            with pytest.raises(ToolGroupDenied, match="'forge' tool group"):
                await agent_call(sock, "forge_create_repo", name="sneaky")
            with pytest.raises(PermissionDenied, match=r"\[matrix\] enabled = false"):
                await agent_call(sock, "matrix_account")
        assert forgejo.tokens_of(PLAIN) == [] and PLAIN not in forgejo.users
        assert "agents/sneaky" not in forgejo.repos


async def test_matrix_accounts_are_issued_and_signed_out_by_the_coordinator(
    tmp_path: Path, synapse: Synapse
) -> None:
    """The coordinator makes the agent's account and hands its socket a token; taking
    [matrix] away (an applied config) signs the account out there, so the token its host
    kept dies, and the socket issues no new one; enabling it again signs in afresh."""
    secret = synapse.write_secret(tmp_path / "matrix-secret")
    hive = f"t{secrets.token_hex(3)}"
    on = AgentConfig(matrix=AgentMatrixConfig(enabled=True))
    seed_home(
        tmp_path,
        {"idc-mia": on},
        hive_toml=f'[matrix]\nhomeserver = "{synapse.url}"\n'
        f'server_name = "{synapse.server_name}"\nhive = "{hive}"\n'
        f'registration_shared_secret_file = "{secret}"\n',
    )
    async with coordinator(tmp_path) as c, agent(c.paths, "idc-mia") as sock:
        issued = await agent_call(sock, "matrix_account")
        assert isinstance(issued, dict)
        assert issued["user_id"] == f"@{hive}-idc-mia:{synapse.server_name}"
        token = str(issued["access_token"])
        assert _whoami(synapse, token) == 200

        await c.lifecycle.apply("idc-mia", AgentConfig(), "take [matrix] away")
        assert _whoami(synapse, token) == 401
        with pytest.raises(PermissionDenied, match=r"\[matrix\] enabled = false"):
            await agent_call(sock, "matrix_account")

        await c.lifecycle.apply("idc-mia", on, "give [matrix] back")
        again = await agent_call(sock, "matrix_account")
        assert isinstance(again, dict) and again["user_id"] == issued["user_id"]
        assert _whoami(synapse, str(again["access_token"])) == 200


def _whoami(synapse: Synapse, token: str) -> int:
    got = httpx.get(
        f"{synapse.url}/_matrix/client/v3/account/whoami",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    return got.status_code


async def test_a_coordinator_without_the_admin_token_says_so_to_the_asking_host(
    tmp_path: Path, forgejo: FakeForgejo, caplog: pytest.LogCaptureFixture
) -> None:
    """Bad config: the coordinator's own [forge] lacks admin_token_file (its [matrix] names
    no credential). It says so at start, and each ask gets the fix, not a crash."""
    seed_home(
        tmp_path,
        {FORGER: AgentConfig(tool_groups=[*ToolGroup.AGENT_DEFAULT, ToolGroup.FORGE])},
        hive_toml=f'[forge]\nurl = "{forgejo.url}"\n[matrix]\nhomeserver = "http://127.0.0.1:9"\n',
    )
    with caplog.at_level("ERROR"):
        async with coordinator(tmp_path) as c, agent(c.paths, FORGER) as sock:
            with pytest.raises(ConfigError, match="admin_token_file is not set in the coordinator"):
                await agent_call(sock, "forge_token")
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "[forge] has no admin_token_file" in logged
    assert "[matrix] in the coordinator's hive.toml names no credential" in logged
    assert forgejo.users.get(FORGER) is None
