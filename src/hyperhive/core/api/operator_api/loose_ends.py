"""Loose ends as the operator sees them: any agent's (or all), cancelled at will, and
the agents' questions answered."""

from __future__ import annotations

from hyperhive.core.api.operator_api.base import OPERATOR_TABLE, OperatorApi
from hyperhive.errors import NotFound
from hyperhive.protocol import (
    Answered,
    Cancelled,
    LooseEnd,
    OpAnswerReq,
    OpCancelLooseEndReq,
    OpLooseEndsReq,
    OpQuestionsReq,
    Question,
)

__all__: list[str] = []


@OPERATOR_TABLE.on(OpLooseEndsReq)
async def _get_loose_ends(api: OperatorApi, req: OpLooseEndsReq) -> list[LooseEnd]:
    if req.agent == "*":
        return list(await api.loose_ends.list_for(None))
    api.registry.require(req.agent)
    return list(await api.loose_ends.list_for([req.agent]))


@OPERATOR_TABLE.on(OpCancelLooseEndReq)
async def _cancel_loose_end(api: OperatorApi, req: OpCancelLooseEndReq) -> Cancelled:
    if await api.loose_ends.row(req.kind, req.row_id) is None:
        raise NotFound(f"no {req.kind} #{req.row_id}")
    done = await api.loose_ends.cancel(req.kind, req.row_id)
    api.scheduler.poke()
    if done and req.kind in ("approval", "question"):  # the operator's waiting count
        api.bus.emit(req.kind, **{f"{req.kind}_id": req.row_id}, state="cancelled")
    if done and req.kind == "approval":
        await api.agent_state.activity.approval_cancelled(req.row_id, "the operator")
    return Cancelled(cancelled=done)


@OPERATOR_TABLE.on(OpQuestionsReq)
async def _questions(api: OperatorApi, req: OpQuestionsReq) -> list[Question]:
    return [Question.model_validate(r) for r in await api.loose_ends.questions(req.open_only)]


@OPERATOR_TABLE.on(OpAnswerReq)
async def _answer_question(api: OperatorApi, req: OpAnswerReq) -> Answered:
    api.broker.check_body(req.answer)
    asker, msg_id = await api.loose_ends.answer_question(req.question_id, req.answer)
    api.bus.emit("question", question_id=req.question_id, state="answered")
    await api.agent_state.activity.question_answered(asker, req.question_id, req.answer, msg_id)
    return Answered(asker=asker, message_id=msg_id)
