"""The harness's side of an agent's turns: waiting for work (held while over budget),
attaching, fencing, ending a turn with its spend, compaction, and what its host
reports of the agent's background tasks."""

from __future__ import annotations

import functools

from hyperhive.core.api.agent_api.base import AGENT_TABLE, COMPACT_THRESHOLD, AgentApi
from hyperhive.protocol import (
    ActivityReported,
    Attached,
    AttachReq,
    CompactQueued,
    CompactReq,
    FenceReq,
    ModelSpend,
    RecordSpendReq,
    ReportActivityReq,
    SpendRecorded,
    TurnEnded,
    TurnEndReq,
    WaitReq,
    WaitResult,
)

__all__: list[str] = []


@AGENT_TABLE.on(WaitReq)
async def _wait(api: AgentApi, req: WaitReq) -> WaitResult:
    return await api.broker.wait(
        api.name, req.timeout, req.todo_version, hold=functools.partial(_over_budget, api)
    )


async def _over_budget(api: AgentApi) -> bool:
    return await api.budgets.held(api.name) is not None


@AGENT_TABLE.on(AttachReq)
async def _attach(api: AgentApi, req: AttachReq) -> Attached:
    incarnation = await api.broker.attach(api.name)
    return Attached(incarnation=incarnation, agent=api.name)


@AGENT_TABLE.on(FenceReq)
async def _fence(api: AgentApi, req: FenceReq) -> None:
    await api.broker.fence(api.name)


@AGENT_TABLE.on(TurnEndReq)
async def _turn_end(api: AgentApi, req: TurnEndReq) -> TurnEnded:
    # Spend first, keyed by the run: a turn_end resent after a restart counts once.
    spent = None
    if req.spend is not None:
        spent, _ = await api.budgets.record(api.name, req.spend)
    # The ack commits with the outcome: a clean turn's mail is never redelivered
    # once turn_end answers.
    return await api.agent_state.turn_end(api.name, req, spent)


@AGENT_TABLE.on(RecordSpendReq)
async def _record_spend(api: AgentApi, req: RecordSpendReq) -> SpendRecorded:
    # A subagent runs in this agent's sandbox and reports through its socket:
    # its spend counts to this agent.
    entry, new = await api.budgets.record(api.name, req.spend)
    return SpendRecorded(recorded=new, spend=ModelSpend.of(entry.figures()))


@AGENT_TABLE.on(CompactReq)
async def _compact(api: AgentApi, req: CompactReq) -> CompactQueued:
    return await api.agent_state.request_compact(api.name, COMPACT_THRESHOLD)


@AGENT_TABLE.on(ReportActivityReq)
async def _report_activity(api: AgentApi, req: ReportActivityReq) -> ActivityReported:
    # The host runs this agent's tasks; what it reports lands on this socket's agent.
    what = "bash task" if req.kind == "bash" else "subagent"
    end = ""
    if req.phase != "started":
        end = f" ({req.status or 'done'}" + (
            f", exit {req.exit_code})" if req.exit_code is not None else ")"
        )
    detail: dict[str, object] = {"ref": req.ref, "phase": req.phase}
    if req.status is not None:
        detail["status"] = req.status
    if req.exit_code is not None:
        detail["exit_code"] = req.exit_code
    await api.agent_state.activity.record(
        req.kind,
        api.name,
        f"{api.name}: {what} {req.ref} {req.phase}{end}: {req.summary}",
        detail=detail,
        key=f"{req.kind}:{api.name}:{req.event_id}",
    )
    return ActivityReported(recorded=True)
