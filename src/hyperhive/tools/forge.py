"""``forge``: create_repo (``hyperhive`` surface; runs on the agent host, see forge/tool.py)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from hyperhive.tools.decl import HYPERHIVE_SERVER, Tool, ToolArgs
from hyperhive.tools.groups import ToolGroup

__all__ = ["TOOLS", "CreateRepoArgs"]


class CreateRepoArgs(ToolArgs):
    name: str = Field(
        description="Repository name: letters, digits, '-', '_', '.'; at most 100; unique in "
        "the hive's org."
    )
    description: str = Field(default="", max_length=2048, description="One-line description.")
    private: bool = Field(default=False, description="Visible only to org members and you.")


TOOLS: tuple[Tool[Any, Any], ...] = (
    Tool(
        HYPERHIVE_SERVER,
        "create_repo",
        "Create a repository in the hive's forge org; you get write access, its default "
        "branch is protected (changes go through pull requests the operator merges). Returns "
        "the clone and web URLs; git over HTTPS works from bash tasks without a password.",
        CreateRepoArgs,
        "the repository's name, clone and web URLs, and how to contribute to it",
        ToolGroup.FORGE,
    ),
)
