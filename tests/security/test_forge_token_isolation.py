"""An agent's forge token under bubblewrap: its own user reads it, no other agent can.

Real per-agent system users (root only), the scripted Forgejo on loopback,
and git inside each sandbox using the credential helper. The token is issued
the way a host gets it: asked of the coordinator on the agent's own socket
(the host side holds no admin token, issue #14).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hyperhive.agent.connection import AgentConnection
from hyperhive.agent.identities import CoordinatorForge
from hyperhive.config import AgentConfig
from hyperhive.core.coordinator import Coordinator
from hyperhive.forge.agent import AgentForge
from hyperhive.forge.identity import TOKEN_FILE
from hyperhive.permissions import ToolGroup
from tests.support.forgejo_server import FakeForgejo
from tests.support.hive import coordinator, seed_home
from tests.support.sandboxed import (
    SYSUSER_MARKS,
    Enclosed,
    agent_enclosed,
    run_sandboxed,
    traversable_home,
)

pytestmark = [
    *SYSUSER_MARKS,  # makes system users
    pytest.mark.anyio,
]

OWNER, OTHER = "fgiso-owner", "fgiso-other"


@pytest.fixture
def home() -> Iterator[Path]:
    with traversable_home("hh-forge-iso-", (OWNER, OTHER)) as path:
        yield path


@asynccontextmanager
async def hive(home: Path, forgejo: FakeForgejo) -> AsyncIterator[Coordinator]:
    token_file = home / "forge-admin-token"
    token_file.write_text(forgejo.admin_token)
    token_file.chmod(0o600)
    groups = [*ToolGroup.AGENT_DEFAULT, ToolGroup.FORGE]
    seed_home(
        home,
        {OWNER: AgentConfig(tool_groups=groups), OTHER: AgentConfig(tool_groups=groups)},
        hive_toml=f'runtime = "bwrap"\n[forge]\nurl = "{forgejo.url}"\n'
        f'admin_token_file = "{token_file}"\n',
    )
    async with coordinator(home) as coord:
        yield coord


@dataclass(frozen=True)
class _OwnSocket:
    """The agent asking on its own socket, as its host's site for it does."""

    name: str
    connection: AgentConnection

    async def call(self, request: Any, within: float = 30.0) -> Any:
        return await self.connection.call(request, within)


async def provisioned(coord: Coordinator, name: str) -> tuple[Enclosed, AgentForge]:
    agent = agent_enclosed(coord, name)
    owner = agent.enclosure.owner
    assert owner is not None
    assert coord.config.forge is not None
    host_side = coord.config.forge.model_copy(update={"admin_token_file": None})
    asking = _OwnSocket(name, AgentConnection(agent.spec.socket))
    forge = AgentForge(CoordinatorForge(asking, host_side), name, agent.state_dir, owner=owner)
    await forge.token()
    return agent, forge


async def sh(agent: Enclosed, script: str) -> tuple[int, str]:
    return await run_sandboxed(agent, ["/bin/sh", "-c", script])


async def test_only_the_agents_own_sandbox_can_use_its_forge_token(home: Path) -> None:
    with FakeForgejo() as forgejo:
        forgejo.add_org("agents")
        async with hive(home, forgejo) as coord:
            owner, owner_forge = await provisioned(coord, OWNER)
            other, _ = await provisioned(coord, OTHER)
            repo = await owner_forge.create_repo("secret-plans", "", private=True)
            token_path = owner.state_dir / TOKEN_FILE
            st = token_path.stat()
            assert st.st_mode & 0o777 == 0o600
            assert (st.st_uid, st.st_gid) == owner.enclosure.owner

            # The owner's git reaches its private repository through the helper.
            code, out = await sh(owner, f"git ls-remote {repo.clone_url}")
            assert code == 0 and "refs/heads/main" in out, out

            # Another agent can neither read the file nor use the owner's access.
            code, out = await sh(other, f"cat {token_path}")
            assert code != 0, out
            assert forgejo.tokens_of(OWNER)[0].sha1 not in out
            code, out = await sh(other, f"git ls-remote {repo.clone_url}")
            assert code != 0, out
            # Not even a host-side copy: the other agent's sandbox does not bind the dir.
            code, out = await sh(other, f"ls {owner.state_dir}")
            assert code != 0, out
