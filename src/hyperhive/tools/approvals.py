"""``approvals``: request_apply_commit (``hyperhive`` surface)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from hyperhive.tools.decl import HYPERHIVE_SERVER, Tool, ToolArgs
from hyperhive.tools.groups import ToolGroup
from hyperhive.wirebase import ApprovalRequested, Req

__all__ = ["TOOLS", "ApplyCommitArgs", "RequestApplyCommitReq"]


class ApplyCommitArgs(ToolArgs):
    agent: str = Field(description="Yourself or a descendant.")
    commit: str = Field(default="HEAD", description="A commit of its proposed config repo.")


class RequestApplyCommitReq(ApplyCommitArgs, Req[ApprovalRequested]):
    """Apply a commit of ``agent``'s proposed config repo (own or a descendant's)."""

    cmd: Literal["request_apply_commit"]
    commit: str = Field(default="HEAD", min_length=1, max_length=64)


TOOLS: tuple[Tool[Any, Any], ...] = (
    Tool(
        HYPERHIVE_SERVER,
        "request_apply_commit",
        "Ask to apply a commit of your or a descendant's proposed config repo: edit "
        "agent.toml in $config_repo, commit it (git -C <repo> commit -am '<why>'), then call "
        "this. Once the operator approves, the agent is rebuilt with it.",
        ApplyCommitArgs,
        "approval #id pending for <agent> at <commit>",
        ToolGroup.APPROVALS,
        wire=RequestApplyCommitReq,
        render=lambda a, r: (
            f"approval #{r.approval_id} pending for {a.agent} at {(r.commit or '')[:12]}"
        ),
    ),
)
