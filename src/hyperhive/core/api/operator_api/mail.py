"""The operator's mail: sending (refused when no reply could come to a sender that
waits for one), following replies, its inbox and outbox, the activity feed, and any
agent's mailbox."""

from __future__ import annotations

from hyperhive.budgets import describe
from hyperhive.core.api.operator_api.base import OPERATOR_TABLE, OperatorApi
from hyperhive.errors import Conflict, OverBudget
from hyperhive.names import OPERATOR
from hyperhive.protocol import (
    Acked,
    ActivityFeed,
    Mailbox,
    Message,
    OpAckReq,
    OpActivityReq,
    OpAwaitReplyReq,
    OpInboxReq,
    OpMessagesReq,
    OpOutboxReq,
    OpSendReq,
    ReplyWait,
    Sent,
)

__all__: list[str] = []


@OPERATOR_TABLE.on(OpSendReq)
async def _send(api: OperatorApi, req: OpSendReq) -> Sent:
    recipient = req.to
    if recipient != OPERATOR:
        api.registry.require(recipient)
        if req.expect_reply:
            await _check_can_reply(api, recipient)
    msg_id = await api.broker.send(OPERATOR, recipient, req.body, req.in_reply_to)
    return Sent(id=msg_id, to=recipient)


async def _check_can_reply(api: OperatorApi, agent: str) -> None:
    """Refuse a send whose sender will wait for a reply that no turn can write."""
    held = await api.budgets.held(agent)
    if held is not None:
        raise OverBudget(
            f"{agent} is over budget ({describe(held)}): it takes no turn, so no reply "
            f"would come. Raise the limit (`hivectl budget set`) or send without --wait"
        )
    if not await api.agent_state.desired_running(agent):
        raise Conflict(f"{agent} is stopped (`hivectl agents start {agent}`): no reply would come")


@OPERATOR_TABLE.on(OpAwaitReplyReq)
async def _await_reply(api: OperatorApi, req: OpAwaitReplyReq) -> ReplyWait:
    return ReplyWait(reply=await api.watch.reply_to(req.message_id, req.wait))


@OPERATOR_TABLE.on(OpInboxReq)
async def _inbox(api: OperatorApi, req: OpInboxReq) -> list[Message]:
    if req.after is not None:
        return await api.watch.inbox_after(req.after, req.limit, req.unread_only, req.wait)
    return list(await api.broker.inbox(OPERATOR, req.limit, req.unread_only))


@OPERATOR_TABLE.on(OpActivityReq)
async def _activity(api: OperatorApi, req: OpActivityReq) -> ActivityFeed:
    return await api.watch.activity(req)


@OPERATOR_TABLE.on(OpOutboxReq)
async def _outbox(api: OperatorApi, req: OpOutboxReq) -> list[Message]:
    return list(await api.broker.outbox(OPERATOR, req.limit))


@OPERATOR_TABLE.on(OpAckReq)
async def _ack_until(api: OperatorApi, req: OpAckReq) -> Acked:
    return Acked(acked=await api.broker.ack_until(OPERATOR, req.up_to))


@OPERATOR_TABLE.on(OpMessagesReq)
async def _messages(api: OperatorApi, req: OpMessagesReq) -> Mailbox:
    api.registry.require(req.agent)
    return Mailbox(
        inbox=await api.broker.inbox(req.agent, req.limit),
        outbox=await api.broker.outbox(req.agent, req.limit),
    )
