"""Approvals: listed, shown and resolved by the operator, and the permission changes it
proposes, read against the config an agent runs with now."""

from __future__ import annotations

from hyperhive.core.api.operator_api.base import OPERATOR_TABLE, OperatorApi
from hyperhive.effective import turn_tool_args
from hyperhive.errors import InvalidRequest
from hyperhive.names import OPERATOR
from hyperhive.permissions import Capability, ToolGroup
from hyperhive.protocol import (
    AgentConfigView,
    ApprovalDetail,
    ApprovalOutcome,
    ApprovalRequested,
    ApprovalView,
    OpApprovalShowReq,
    OpApprovalsReq,
    OpConfigReq,
    OpPermsSetReq,
    OpResolveReq,
)

__all__: list[str] = []


@OPERATOR_TABLE.on(OpApprovalsReq)
async def _approvals(api: OperatorApi, req: OpApprovalsReq) -> list[ApprovalView]:
    return await api.approvals.list(req.pending_only)


@OPERATOR_TABLE.on(OpApprovalShowReq)
async def _approval_show(api: OperatorApi, req: OpApprovalShowReq) -> ApprovalDetail:
    return await api.approvals.show(req.approval_id)


@OPERATOR_TABLE.on(OpResolveReq)
async def _resolve(api: OperatorApi, req: OpResolveReq) -> ApprovalOutcome:
    approve = req.cmd == "approve"
    if not approve and not req.reason.strip():
        raise InvalidRequest("say why: deny needs a reason (--reason), which the asker reads")
    return await api.approvals.resolve(req.approval_id, approve, req.reason, req.host)


@OPERATOR_TABLE.on(OpConfigReq)
async def _agent_config(api: OperatorApi, req: OpConfigReq) -> AgentConfigView:
    cfg = api.registry.config(req.agent)
    args = turn_tool_args(cfg)  # exactly what its turns get (bash only with execution)
    return AgentConfigView(
        agent=req.agent,
        config=cfg.model_dump(mode="json"),
        tool_groups=[g.value for g in cfg.tool_groups],
        capabilities=[c.value for c in cfg.capabilities],
        tools_arg=args.tools,
        allowed_tools_arg=args.allowed_tools,
    )


@OPERATOR_TABLE.on(OpPermsSetReq)
async def _perms_set(api: OperatorApi, req: OpPermsSetReq) -> ApprovalRequested:
    current = api.registry.config(req.agent)
    try:
        groups = [ToolGroup(g.strip().lower()) for g in req.tool_groups if g.strip()]
        caps = [Capability(c.strip().lower()) for c in req.capabilities if c.strip()]
    except ValueError as exc:
        raise InvalidRequest(f"{exc}; known groups: {', '.join(ToolGroup.ALL)}") from exc
    if not groups:
        raise InvalidRequest("an agent needs at least one tool group")
    proposed = current.model_copy(update={"tool_groups": groups, "capabilities": caps})
    return await api.approvals.propose(
        OPERATOR, req.agent, proposed, "permissions: " + ",".join(groups)
    )
