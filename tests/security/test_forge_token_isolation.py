"""An agent's forge token under bubblewrap: its own user reads it, no other agent can.

Real per-agent system users (root only), the scripted Forgejo on loopback,
and git inside each sandbox using the credential helper. The token is issued
the way a host gets it: asked of the coordinator on the agent's own socket
(the host side holds no admin token, issue #14).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from hyperhive.agent.identities import CoordinatorForge
from hyperhive.agent.runtime import AgentRuntime
from hyperhive.config import AgentConfig
from hyperhive.core.coordinator import Coordinator
from hyperhive.forge.agent import AgentForge
from hyperhive.forge.identity import TOKEN_FILE
from hyperhive.permissions import ToolGroup
from tests.support.forgejo_server import FakeForgejo
from tests.support.hive import coordinator, seed_home
from tests.support.sandboxed import SYSUSER_MARKS, agent_runtime, run_sandboxed, traversable_home

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


async def provisioned(coord: Coordinator, name: str) -> AgentRuntime:
    rt = agent_runtime(coord, name)
    iso = rt.isolation
    assert iso is not None and iso.uid is not None and iso.gid is not None
    assert coord.config.forge is not None
    host_side = coord.config.forge.model_copy(update={"admin_token_file": None})
    rt.forge = AgentForge(
        CoordinatorForge(rt, host_side), name, rt.state_dir, owner=(iso.uid, iso.gid)
    )
    await rt.forge.token()
    return rt


async def sh(rt: AgentRuntime, script: str) -> tuple[int, str]:
    return await run_sandboxed(rt, ["/bin/sh", "-c", script])


async def test_only_the_agents_own_sandbox_can_use_its_forge_token(home: Path) -> None:
    with FakeForgejo() as forgejo:
        forgejo.add_org("agents")
        async with hive(home, forgejo) as coord:
            owner = await provisioned(coord, OWNER)
            other = await provisioned(coord, OTHER)
            assert owner.forge is not None
            repo = await owner.forge.create_repo("secret-plans", "", private=True)
            token_path = owner.state_dir / TOKEN_FILE
            st = token_path.stat()
            assert st.st_mode & 0o777 == 0o600
            assert st.st_uid == owner.isolation.uid  # type: ignore[union-attr]

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
