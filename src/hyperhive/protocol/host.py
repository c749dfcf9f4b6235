"""Requests on the operator socket (``hivectl``, the dashboard)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
)

from hyperhive.config import AgentConfig
from hyperhive.protocol.base import LooseEndKind, RowId, _Req

# ---- operator socket ------------------------------------------------------


class OpSendReq(_Req):
    cmd: Literal["send"]
    to: str
    body: str
    in_reply_to: RowId | None = None


class OpInboxReq(_Req):
    cmd: Literal["inbox"]
    limit: int = Field(default=50, ge=1, le=1000)
    unread_only: bool = False


class OpOutboxReq(_Req):
    """Messages the operator sent (newest ``limit``, oldest first)."""

    cmd: Literal["outbox"]
    limit: int = Field(default=50, ge=1, le=1000)


class OpAckReq(_Req):
    cmd: Literal["ack_until"]
    up_to: RowId


class OpAgentsReq(_Req):
    cmd: Literal["agents"]


class OpSetParentReq(_Req):
    cmd: Literal["set_parent"]
    child: str
    new_parent: str | None = None


class OpTopologyReq(_Req):
    cmd: Literal["topology"]


class OpLooseEndsReq(_Req):
    cmd: Literal["get_loose_ends"]
    agent: str = "*"


class OpCancelLooseEndReq(_Req):
    cmd: Literal["cancel_loose_end"]
    kind: LooseEndKind
    row_id: RowId


class OpQuestionsReq(_Req):
    cmd: Literal["questions"]
    open_only: bool = True


class OpAnswerReq(_Req):
    cmd: Literal["answer_question"]
    question_id: RowId
    answer: str


class OpSpawnReq(_Req):
    cmd: Literal["spawn"]
    name: str
    config: AgentConfig = Field(default_factory=AgentConfig)
    parent: str | None = None


class OpStatusReq(_Req):
    cmd: Literal["status"]


class OpMessagesReq(_Req):
    """An agent's inbox and outbox, for the operator."""

    cmd: Literal["messages"]
    agent: str
    limit: int = Field(default=50, ge=1, le=1000)


class OpApprovalsReq(_Req):
    cmd: Literal["approvals"]
    pending_only: bool = True


class OpApprovalShowReq(_Req):
    cmd: Literal["approval_show"]
    approval_id: RowId


class OpResolveReq(_Req):
    cmd: Literal["approve", "deny"]
    approval_id: RowId
    reason: str = ""


class OpLifecycleReq(_Req):
    """The operator's kill/start/restart/update/destroy of any agent."""

    cmd: Literal["agent_kill", "agent_start", "agent_restart", "agent_update", "agent_destroy"]
    agent: str


class OpLogsReq(_Req):
    cmd: Literal["logs"]
    agent: str
    lines: int = Field(default=100, ge=1, le=5000)


class OpCompactReq(_Req):
    cmd: Literal["compact"]
    agent: str


class OpPermsSetReq(_Req):
    """Propose new tool groups/capabilities for an agent (an approval to apply)."""

    cmd: Literal["perms_set"]
    agent: str
    tool_groups: list[str]
    capabilities: list[str] = Field(default_factory=list)


class OpConfigReq(_Req):
    cmd: Literal["agent_config"]
    agent: str


class OpAgentForgeReq(_Req):
    """An agent's forge user and repositories, for the operator."""

    cmd: Literal["agent_forge"]
    agent: str


HostRequest = Annotated[
    OpSendReq
    | OpInboxReq
    | OpOutboxReq
    | OpAckReq
    | OpAgentsReq
    | OpSetParentReq
    | OpTopologyReq
    | OpLooseEndsReq
    | OpCancelLooseEndReq
    | OpQuestionsReq
    | OpAnswerReq
    | OpSpawnReq
    | OpStatusReq
    | OpMessagesReq
    | OpApprovalsReq
    | OpApprovalShowReq
    | OpResolveReq
    | OpLifecycleReq
    | OpLogsReq
    | OpCompactReq
    | OpPermsSetReq
    | OpConfigReq
    | OpAgentForgeReq,
    Field(discriminator="cmd"),
]
