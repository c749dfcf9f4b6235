"""An agent's messages: sending (routed by the topology), receiving, acking, asking
the operator, and the wake messages its in-sandbox producers send it."""

from __future__ import annotations

from hyperhive import topology
from hyperhive.core.api.agent_api.base import AGENT_TABLE, AgentApi
from hyperhive.errors import InvalidName, InvalidRequest, PermissionDenied
from hyperhive.names import RESERVED_NAMES, validate_task_name
from hyperhive.protocol import (
    Acked,
    AckUntilReq,
    Asked,
    AskOperatorReq,
    Created,
    Message,
    RecvReq,
    SendReq,
    Sent,
    WakeReq,
)

__all__: list[str] = []


@AGENT_TABLE.on(SendReq)
async def _send(api: AgentApi, req: SendReq) -> Sent:
    recipient = api.resolve_recipient(req.to)
    cfg = api.registry.config(api.name)
    decision = topology.check_route(
        api.tree(), api.name, recipient, cfg.allowed_recipients, cfg.extra_recipients
    )
    if not decision.allowed:
        raise topology.refuse_route(api.name, recipient, decision)
    msg_id = await api.broker.send(api.name, recipient, req.body, req.in_reply_to)
    return Sent(id=msg_id, to=recipient)


@AGENT_TABLE.on(RecvReq)
async def _recv(api: AgentApi, req: RecvReq) -> list[Message]:
    return list(await api.broker.recv(api.name, req.max))


@AGENT_TABLE.on(AckUntilReq)
async def _ack_until(api: AgentApi, req: AckUntilReq) -> Acked:
    return Acked(acked=await api.broker.ack_until(api.name, req.up_to))


@AGENT_TABLE.on(AskOperatorReq)
async def _ask_operator(api: AgentApi, req: AskOperatorReq) -> Asked:
    api.broker.check_body(req.question)
    qid, mid = await api.loose_ends.ask_operator(api.name, req.question)
    api.bus.emit("question", question_id=qid, state="open", asker=api.name)
    await api.agent_state.activity.question_asked(api.name, qid, req.question)
    return Asked(question_id=qid, message_id=mid)


@AGENT_TABLE.on(WakeReq)
async def _wake(api: AgentApi, req: WakeReq) -> Created:
    label = req.sender
    try:
        validate_task_name(label)
    except InvalidName as exc:
        raise InvalidRequest(f"wake label: {exc.message}") from exc
    if label in RESERVED_NAMES or api.registry.exists(label):
        raise PermissionDenied(
            f"wake label {label!r} is an agent or reserved name; a producer names itself "
            "(e.g. 'matrix', 'forge'), never someone else"
        )
    if req.key is not None:
        return Created(id=await api.broker.send_keyed(label, api.name, req.body, req.key))
    return Created(id=await api.broker.send(label, api.name, req.body))
