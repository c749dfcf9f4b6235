"""The JSON API under ``/api/``: everything the pages do, described by OpenAPI.

Each route is one operator request (``hyperhive.protocol.HostRequest``) or a
read of the agent host; refusals come back as ``{ok: false, error: {code,
message}}`` with the status ``errors.status_for`` picks.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from hyperhive.config import parse_agent_config
from hyperhive.core.api.agent_api import COMPACT_THRESHOLD
from hyperhive.core.api.dashboard.live import EventStream, agent_events, hive_events
from hyperhive.core.api.dashboard.state import Dashboard, dashboard
from hyperhive.core.api.dashboard.views import compact_rule, perms_preview, thread_messages
from hyperhive.errors import InvalidRequest, NotFound, Unavailable
from hyperhive.protocol import (
    Acked,
    AgentConfigView,
    Answered,
    ApprovalDetail,
    ApprovalOutcome,
    ApprovalRequested,
    ApprovalView,
    Cancelled,
    CompactQueued,
    HiveStatus,
    Interrupted,
    LifecycleResult,
    LogTail,
    LooseEnd,
    Mailbox,
    Message,
    OpAckReq,
    OpAnswerReq,
    OpApprovalShowReq,
    OpApprovalsReq,
    OpCancelLooseEndReq,
    OpCompactReq,
    OpConfigReq,
    OpInboxReq,
    OpInterruptReq,
    OpLifecycleReq,
    OpLogsReq,
    OpLooseEndsReq,
    OpMessagesReq,
    OpOutboxReq,
    OpPermsSetReq,
    OpQuestionsReq,
    OpResolveReq,
    OpSendReq,
    OpSetParentReq,
    OpSpawnReq,
    OpStatusReq,
    OpTopologyReq,
    ParentSet,
    Question,
    Sent,
    SpawnResult,
)
from hyperhive.protocol.steer import MAX_TELL

__all__ = ["router"]

router = APIRouter(prefix="/api")
Dash = Annotated[Dashboard, Depends(dashboard)]
Json = dict[str, Any]
_SSE: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/event-stream": {}}, "description": "server-sent events"}
}
Limit = Annotated[int, Query(ge=1, le=1000)]
RowId = Annotated[int, Field(ge=0, le=2**63 - 1)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SpawnBody(_Body):
    name: str
    parent: str | None = None
    config_toml: str = Field(default="", description="agent.toml text; blank = the default")
    host: str | None = Field(
        default=None, description="pin it to this agent host (blank: placed automatically)"
    )


class DestroyBody(_Body):
    confirm: str = Field(description="must repeat the agent's name")


class InterruptBody(_Body):
    tell: str | None = Field(
        default=None,
        max_length=MAX_TELL,
        description="text for the model: into the interrupted turn (no turn: a message)",
    )


class PermsBody(_Body):
    tool_groups: list[str]
    capabilities: list[str] = Field(default_factory=list)


class ReasonBody(_Body):
    reason: str = ""


class ApproveBody(ReasonBody):
    # A spawn's agent host (empty: automatic, as the approval view's select sends it).
    host: str = ""


class SendBody(_Body):
    to: str
    body: str
    in_reply_to: RowId | None = None


class ReplyBody(_Body):
    body: str


class AckBody(_Body):
    up_to: RowId


class AnswerBody(_Body):
    answer: str


class Verb(StrEnum):
    kill = "kill"
    start = "start"
    restart = "restart"
    update = "update"


class LooseEndKind(StrEnum):
    reminder = "reminder"
    approval = "approval"
    todo = "todo"
    question = "question"
    schedule = "schedule"


# ---- the hive ------------------------------------------------------------------


@router.get("/status")
async def status(d: Dash) -> HiveStatus:
    return await d.ops.request(OpStatusReq)


@router.get("/agents")
async def agents(d: Dash) -> list[Json]:
    """Every agent: name, parent, running, turn_state(+since), status_text, badges."""
    return await d.agents()


@router.get("/topology")
async def get_topology(d: Dash) -> dict[str, str | None]:
    return await d.ops.request(OpTopologyReq)


@router.post("/topology/set-parent")
async def set_parent(
    d: Dash, child: Annotated[str, Form()], new_parent: Annotated[str, Form()] = ""
) -> ParentSet:
    """Move ``child`` under ``new_parent``; absent or empty promotes it to a root."""
    return await d.ops.request(OpSetParentReq, child=child, new_parent=new_parent or None)


@router.get("/events", response_class=Response, responses=_SSE)
async def events(d: Dash) -> Response:
    """SSE: topology, agent, turn, status, approval, host and inbox events."""
    return EventStream(lambda emit: hive_events(d.parts.bus, d.parts.notifier, emit), d.closing)


# ---- one agent -------------------------------------------------------------------


@router.post("/agents")
async def spawn(d: Dash, body: SpawnBody) -> SpawnResult:
    """The operator's own spawn (no approval)."""
    config = parse_agent_config(body.config_toml, f"{body.name}/agent.toml", strict=True)
    return await d.ops.request(
        OpSpawnReq, name=body.name, parent=body.parent, config=config, host=body.host or None
    )


async def _agent_row(d: Dashboard, name: str) -> Json:
    for row in await d.agents():
        if row["name"] == name:
            return row
    raise NotFound(f"no agent named {name!r}; `hivectl agents list` shows the hive")


@router.get("/agents/{name}")
async def agent(d: Dash, name: str) -> Json:
    row = await _agent_row(d, name)
    row["compact_rule"] = compact_rule(row.get("last_context_usage"), COMPACT_THRESHOLD)
    return row


@router.get("/agents/{name}/messages")
async def messages(d: Dash, name: str, limit: Limit = 50) -> Mailbox:
    return await d.ops.request(OpMessagesReq, agent=name, limit=limit)


@router.get("/agents/{name}/loose-ends")
async def agent_loose_ends(d: Dash, name: str) -> list[LooseEnd]:
    return await d.ops.request(OpLooseEndsReq, agent=name)


@router.get("/agents/{name}/logs")
async def logs(d: Dash, name: str, lines: Annotated[int, Query(ge=1, le=5000)] = 100) -> LogTail:
    return await d.ops.request(OpLogsReq, agent=name, lines=lines)


@router.get("/agents/{name}/state")
async def agent_state(d: Dash, name: str) -> Json:
    """The host's authoritative turn state, else the coordinator's last report."""
    row = await _agent_row(d, name)
    try:
        return await d.proxy.state(name)
    except Unavailable:
        return {
            "agent": name,
            "turn_state": row["turn_state"],
            "turn_state_since": row["turn_state_since"],
            "status_text": row["status_text"],
            "context_usage": row["last_context_usage"],
        }


@router.get("/agents/{name}/events", response_class=Response, responses=_SSE)
async def agent_stream(d: Dash, name: str) -> Response:
    """SSE: the agent's turn stream (text, tool calls, results), proxied from its host."""
    d.parts.registry.require(name)
    return EventStream(
        lambda emit: agent_events(d.parts.bus, d.parts.hostlink, d.proxy, name, emit), d.closing
    )


@router.post("/agents/{name}/compact")
async def compact(d: Dash, name: str) -> CompactQueued:
    """Queue a compaction after the current turn, at any usage (the operator's is ungated)."""
    return await d.ops.request(OpCompactReq, agent=name)


@router.post("/agents/{name}/interrupt")
async def interrupt(d: Dash, name: str, body: InterruptBody) -> Interrupted:
    """End the running turn (outcome interrupted, session kept, mail redelivered); with
    ``tell``, its model gets the text too. No turn running: refused, or ``tell`` is sent."""
    return await d.ops.request(OpInterruptReq, agent=name, tell=body.tell or None)


@router.post("/agents/{name}/destroy")
async def destroy(d: Dash, name: str, body: DestroyBody) -> LifecycleResult:
    if body.confirm != name:
        raise InvalidRequest(f"to destroy {name!r}, confirm with its name")
    return await d.ops.request(OpLifecycleReq, cmd="agent_destroy", agent=name)


@router.get("/agents/{name}/perms")
async def perms(d: Dash, name: str) -> AgentConfigView:
    """Tool groups, capabilities and the exact ``--tools`` / ``--allowedTools``."""
    d.parts.registry.require(name)
    return await d.ops.request(OpConfigReq, agent=name)


@router.get("/agents/{name}/perms/preview")
async def perms_preview_route(d: Dash, name: str, groups: str = "", caps: str = "") -> Json:
    """What ``--tools`` / ``--allowedTools`` the toggled groups would give ``name``."""
    d.parts.registry.require(name)
    return perms_preview(groups.split(","), caps.split(","), d.parts.registry.config(name))


@router.post("/agents/{name}/perms")
async def perms_set(d: Dash, name: str, body: PermsBody) -> ApprovalRequested:
    """Propose the groups/capabilities: creates an approval (applied when approved)."""
    d.parts.registry.require(name)
    return await d.ops.request(
        OpPermsSetReq, agent=name, tool_groups=body.tool_groups, capabilities=body.capabilities
    )


@router.post("/agents/{name}/{verb}")
async def lifecycle(d: Dash, name: str, verb: Verb) -> LifecycleResult:
    """kill / start / restart / update."""
    return await d.ops.request(OpLifecycleReq, cmd=f"agent_{verb.value}", agent=name)


# ---- approvals, mail, questions, loose ends ------------------------------------------


@router.get("/approvals")
async def approvals(d: Dash, all: bool = False) -> list[ApprovalView]:
    return await d.ops.request(OpApprovalsReq, pending_only=not all)


@router.get("/approvals/{approval_id}")
async def approval(d: Dash, approval_id: int) -> ApprovalDetail:
    """One approval: the config diff, and ``effective`` — parent, tool groups, the exact
    ``--tools`` / ``--allowedTools`` and the agent.toml with defaults filled in."""
    return await d.ops.request(OpApprovalShowReq, approval_id=approval_id)


@router.post("/approvals/{approval_id}/approve")
async def approve(d: Dash, approval_id: int, body: ApproveBody | None = None) -> ApprovalOutcome:
    """Approve and carry out; for a spawn, ``host`` pins the new agent to that agent host
    (empty: placed automatically)."""
    reason = body.reason if body else ""
    host = (body.host or None) if body else None
    return await d.ops.request(
        OpResolveReq, cmd="approve", approval_id=approval_id, reason=reason, host=host
    )


@router.post("/approvals/{approval_id}/deny")
async def deny(d: Dash, approval_id: int, body: ReasonBody) -> ApprovalOutcome:
    return await d.ops.request(
        OpResolveReq, cmd="deny", approval_id=approval_id, reason=body.reason
    )


@router.get("/inbox")
async def inbox(d: Dash, limit: Limit = 50, unread: bool = False) -> list[Message]:
    """Messages to the operator: id, from, to, body, in_reply_to, created_at, acked."""
    return await d.ops.request(OpInboxReq, limit=limit, unread_only=unread)


async def operator_threads(d: Dashboard, limit: int = 200) -> list[Json]:
    received: list[Json] = await d.ops.view(OpInboxReq, limit=limit)
    sent: list[Json] = await d.ops.view(OpOutboxReq, limit=limit)
    threads = thread_messages([*received, *sent])
    return [
        {
            "last_at": t.last_at,
            "messages": [{**m, "depth": depth} for depth, m in t.messages],
        }
        for t in threads
    ]


@router.get("/inbox/threads")
async def threads(d: Dash) -> list[Json]:
    """The operator's conversations, threaded by ``in_reply_to``, newest first."""
    return await operator_threads(d)


@router.post("/inbox/ack")
async def ack(d: Dash, body: AckBody) -> Acked:
    """Mark the operator's messages up to ``up_to`` as read."""
    return await d.ops.request(OpAckReq, up_to=body.up_to)


@router.post("/inbox/{message_id}/reply")
async def reply(d: Dash, message_id: int, body: ReplyBody) -> Sent:
    """Answer a message in the operator's inbox (to its sender, ``in_reply_to`` set)."""
    rows = await d.ops.request(OpInboxReq, limit=1000)
    match = next((m for m in rows if m.id == message_id), None)
    if match is None:
        raise NotFound(f"no message #{message_id} in the operator's inbox")
    return await d.ops.request(OpSendReq, to=match.sender, body=body.body, in_reply_to=message_id)


@router.post("/messages")
async def send(d: Dash, body: SendBody) -> Sent:
    return await d.ops.request(OpSendReq, to=body.to, body=body.body, in_reply_to=body.in_reply_to)


@router.get("/questions")
async def questions(d: Dash, all: bool = False) -> list[Question]:
    return await d.ops.request(OpQuestionsReq, open_only=not all)


@router.post("/questions/{question_id}/answer")
async def answer(d: Dash, question_id: int, body: AnswerBody) -> Answered:
    return await d.ops.request(OpAnswerReq, question_id=question_id, answer=body.answer)


@router.get("/loose-ends")
async def loose_ends(d: Dash) -> list[LooseEnd]:
    """Every open loose end of the hive (reminders, approvals, todos, questions, schedules)."""
    return await d.ops.request(OpLooseEndsReq)


@router.post("/loose-ends/{kind}/{row_id}/cancel")
async def cancel_loose_end(d: Dash, kind: LooseEndKind, row_id: int) -> Cancelled:
    return await d.ops.request(OpCancelLooseEndReq, kind=kind.value, row_id=row_id)
