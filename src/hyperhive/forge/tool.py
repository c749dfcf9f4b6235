"""``create_repo`` on the ``hyperhive`` MCP surface (group ``forge``).

The caller is the agent the surface authenticated (path + bearer token),
never a name in the arguments.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from hyperhive.agent.mcp_surface import ToolSpec
from hyperhive.forge.agent import AgentForge
from hyperhive.forge.errors import ForgeNotConfigured
from hyperhive.permissions import ToolGroup

__all__ = ["CreateRepoArgs", "create_repo_tool"]


class CreateRepoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        description="Repository name: letters, digits, '-', '_', '.'; at most 100; unique in "
        "the hive's org."
    )
    description: str = Field(default="", max_length=2048, description="One-line description.")
    private: bool = Field(default=False, description="Visible only to org members and you.")


class ForgeCaller(Protocol):
    name: str
    forge: AgentForge | None
    forge_problem: str | None


async def _create_repo(agent: ForgeCaller, a: CreateRepoArgs) -> str:
    if agent.forge is None:
        raise ForgeNotConfigured(
            agent.forge_problem
            or "no forge is configured for this hive: the operator sets [forge] url and "
            "admin_token_file in hive.toml (README, 'Forge')"
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


def create_repo_tool() -> ToolSpec:
    return ToolSpec(
        "create_repo",
        "Create a repository in the hive's forge org; you get write access, its default "
        "branch is protected (changes go through pull requests the operator merges). Returns "
        "the clone and web URLs; git over HTTPS works from bash tasks without a password.",
        CreateRepoArgs,
        _create_repo,
        ToolGroup.FORGE,
    )
