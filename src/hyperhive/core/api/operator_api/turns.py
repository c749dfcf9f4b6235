"""Turns and their spend: budgets and spend reports, the turn records, and a running
turn interrupted or a compaction queued."""

from __future__ import annotations

import re

from hyperhive.core.api.operator_api.base import OPERATOR_TABLE, OperatorApi
from hyperhive.errors import Conflict, NotFound
from hyperhive.names import OPERATOR
from hyperhive.protocol import (
    BudgetView,
    CompactQueued,
    Interrupted,
    OpBudgetReq,
    OpBudgetSetReq,
    OpCompactReq,
    OpInterruptReq,
    OpSpendReq,
    OpSpendSeriesReq,
    SpendReport,
    SpendSeries,
)
from hyperhive.protocol.turns import (
    TURN_ID,
    OpTurnShowReq,
    OpTurnsListReq,
    OpTurnsSearchReq,
    TurnHit,
    TurnRecord,
    TurnSummary,
    agent_of_turn,
)

__all__: list[str] = []


@OPERATOR_TABLE.on(OpBudgetReq)
async def _budget(api: OperatorApi, req: OpBudgetReq) -> BudgetView:
    return await api.budgets.view()


@OPERATOR_TABLE.on(OpBudgetSetReq)
async def _budget_set(api: OperatorApi, req: OpBudgetSetReq) -> BudgetView:
    return await api.budgets.set_limits(req.scope, req.limits, req.reset)


@OPERATOR_TABLE.on(OpSpendReq)
async def _spend(api: OperatorApi, req: OpSpendReq) -> SpendReport:
    return await api.budgets.report()


@OPERATOR_TABLE.on(OpSpendSeriesReq)
async def _spend_series(api: OperatorApi, req: OpSpendSeriesReq) -> SpendSeries:
    return await api.budgets.series(req.days)


@OPERATOR_TABLE.on(OpTurnsListReq)
async def _turns_list(api: OperatorApi, req: OpTurnsListReq) -> list[TurnSummary]:
    api.registry.require(req.agent)
    return await api.turns.list_turns(req.agent, req.since, req.limit)


@OPERATOR_TABLE.on(OpTurnShowReq)
async def _turn_show(api: OperatorApi, req: OpTurnShowReq) -> TurnRecord:
    if not re.match(TURN_ID, req.turn):
        raise NotFound(f"no turn {req.turn}: a turn id is <agent>.<time>-<random>")
    api.registry.require(agent_of_turn(req.turn))
    return await api.turns.show(req.turn, req.after_seq, req.full)


@OPERATOR_TABLE.on(OpTurnsSearchReq)
async def _turns_search(api: OperatorApi, req: OpTurnsSearchReq) -> list[TurnHit]:
    if req.agent is not None:
        api.registry.require(req.agent)
    return await api.turns.search(req.text, req.agent, req.limit)


@OPERATOR_TABLE.on(OpInterruptReq)
async def _interrupt(api: OperatorApi, req: OpInterruptReq) -> Interrupted:
    api.registry.require(req.agent)
    if req.tell is not None:
        api.broker.check_body(req.tell)
    if api.hostlink.running(req.agent):
        got = await api.hostlink.interrupt(req.agent, req.tell)
        if got.interrupted:
            told = "turn" if req.tell is not None else None
            return Interrupted(agent=req.agent, interrupted=True, told=told)
    if req.tell is None:
        raise Conflict(
            f"{req.agent} is not running a turn: nothing to interrupt "
            "(--tell TEXT would send the text as a message for its next turn)"
        )
    # No turn to steer: the text is an operator message, and wakes the next one.
    msg_id = await api.broker.send(OPERATOR, req.agent, req.tell)
    return Interrupted(agent=req.agent, interrupted=False, told="message", message_id=msg_id)


@OPERATOR_TABLE.on(OpCompactReq)
async def _compact(api: OperatorApi, req: OpCompactReq) -> CompactQueued:
    api.registry.require(req.agent)
    # Ungated: the 66% rule keeps an agent from compacting itself for nothing;
    # the operator decides with more than the last turn's usage to go on.
    return await api.agent_state.request_compact(req.agent, None)
