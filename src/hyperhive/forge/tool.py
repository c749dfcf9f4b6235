"""``create_repo``'s handler on the ``hyperhive`` MCP surface (declared in tools/forge.py).

The caller is the agent the surface authenticated (path + bearer token),
never a name in the arguments.
"""

from __future__ import annotations

from typing import Protocol

from hyperhive.forge.agent import AgentForge
from hyperhive.forge.errors import ForgeNotConfigured
from hyperhive.tools.forge import CreateRepoArgs

__all__ = ["CreateRepoArgs", "ForgeCaller", "create_repo"]


class ForgeCaller(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def forge(self) -> AgentForge | None: ...

    @property
    def forge_problem(self) -> str | None: ...


async def create_repo(agent: ForgeCaller, a: CreateRepoArgs) -> str:
    if agent.forge is None:
        raise ForgeNotConfigured(
            agent.forge_problem
            or "no forge is configured for this hive: the operator sets [forge] url and "
            "admin_token_file in hive.toml (docs/forge.md)"
        )
    repo = await agent.forge.create_repo(a.name, a.description, a.private)
    return (
        f"created {repo.full_name} ({'private' if repo.private else 'public'}); you have write "
        f"access as {agent.forge.username}.\n"
        f"clone: {repo.clone_url}\n"
        f"web: {repo.web_url}\n"
        f"{repo.default_branch} is protected: push a branch and open a pull request; "
        "the operator team reviews and merges."
    )
