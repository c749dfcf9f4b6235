"""An agent's loose ends: todos, reminders, questions and approvals it may read or
cancel (its own, or its descendants'), and the prompts it schedules."""

from __future__ import annotations

import time

from hyperhive import topology
from hyperhive.core.api.agent_api.base import AGENT_TABLE, AgentApi
from hyperhive.core.state.loose_ends import owner_of
from hyperhive.errors import Conflict, InvalidRequest, LimitExceeded, NotFound, PermissionDenied
from hyperhive.permissions import Capability
from hyperhive.protocol import (
    Cancelled,
    CancelLooseEndReq,
    CancelScheduleReq,
    Cleared,
    Created,
    GetLooseEndsReq,
    ListSchedulesReq,
    LooseEnd,
    Reminded,
    RemindReq,
    Schedule,
    SchedulePromptReq,
    TodoClearReq,
    TodoUpsertReq,
)
from hyperhive.protocol.agent import REMIND_MAX_BYTES

__all__: list[str] = []


@AGENT_TABLE.on(TodoUpsertReq)
async def _todo_upsert(api: AgentApi, req: TodoUpsertReq) -> Created:
    api.broker.check_body(req.body)
    todo = await api.loose_ends.todo_upsert(
        api.name, req.subsystem, req.key, req.body, wake=req.wake
    )
    return Created(id=todo)


@AGENT_TABLE.on(TodoClearReq)
async def _todo_clear(api: AgentApi, req: TodoClearReq) -> Cleared:
    return Cleared(cleared=await api.loose_ends.todo_clear(api.name, req.subsystem, req.key))


@AGENT_TABLE.on(RemindReq)
async def _remind(api: AgentApi, req: RemindReq) -> Reminded:
    size = len(req.message.encode("utf-8"))
    if size > REMIND_MAX_BYTES:
        raise LimitExceeded(
            f"a reminder is at most {REMIND_MAX_BYTES} bytes ({REMIND_MAX_BYTES // 1024} KiB) "
            f"of UTF-8; this one is {size}: keep the detail in a file under your state "
            "directory and remind yourself of its path"
        )
    now = time.time()
    due = now + req.delay_seconds if req.delay_seconds is not None else req.at_unix_timestamp
    assert due is not None
    if due - now > 5 * 365 * 86400:
        raise InvalidRequest("a reminder more than five years out is refused; pick a nearer time")
    rid = await api.loose_ends.remind(api.name, req.message, max(due, now))
    api.scheduler.poke()
    return Reminded(id=rid, due_at=due)


@AGENT_TABLE.on(GetLooseEndsReq)
async def _get_loose_ends(api: AgentApi, req: GetLooseEndsReq) -> list[LooseEnd]:
    target = req.agent or api.name
    if target == "*":
        raise PermissionDenied(
            "the hive-wide '*' query is only for the operator; pass an agent name"
        )
    if target != api.name:
        api.registry.require(target)
        topo = api.tree()
        if not topology.is_descendant_of(topo, target, api.name):
            caps = api.registry.config(api.name).capabilities
            if Capability.QUERY_AGENT_STATE not in caps:
                raise PermissionDenied(
                    f"{target} is not your descendant; reading its loose ends needs the "
                    "query_agent_state capability"
                )
    return list(await api.loose_ends.list_for([target]))


@AGENT_TABLE.on(CancelLooseEndReq)
async def _cancel_loose_end(api: AgentApi, req: CancelLooseEndReq) -> Cancelled:
    topo = api.tree()
    if req.kind == "approval" and topo.get(api.name) is not None:
        raise PermissionDenied("only a root agent may cancel an approval (not a root)")
    row = await api.loose_ends.row(req.kind, req.row_id)
    if row is None:
        raise NotFound(f"no {req.kind} #{req.row_id}")
    owner = owner_of(req.kind, row)
    if owner != api.name:
        moderates = req.kind in ("reminder", "question") and topology.is_descendant_of(
            topo, owner, api.name
        )
        if not moderates:
            raise PermissionDenied(
                f"{req.kind} #{req.row_id} belongs to {owner}; you may cancel your own rows "
                "and your descendants' reminders and questions (not a descendant)"
            )
    done = await api.loose_ends.cancel(req.kind, req.row_id)
    if done and req.kind == "approval":
        await api.agent_state.activity.approval_cancelled(req.row_id, api.name)
    if req.kind == "reminder":
        api.scheduler.poke()
    if done and req.kind in ("approval", "question"):  # the operator's waiting count
        api.bus.emit(req.kind, **{f"{req.kind}_id": req.row_id}, state="cancelled")
    return Cancelled(cancelled=done)


@AGENT_TABLE.on(SchedulePromptReq)
async def _schedule_prompt(api: AgentApi, req: SchedulePromptReq) -> Created:
    api.self_or_descendant(req.target)
    api.broker.check_body(req.prompt)
    sid = await api.loose_ends.schedule(
        api.name, req.target, req.prompt, req.every_seconds, req.cron
    )
    api.scheduler.poke()
    return Created(id=sid)


@AGENT_TABLE.on(ListSchedulesReq)
async def _list_schedules(api: AgentApi, req: ListSchedulesReq) -> list[Schedule]:
    scope = [api.name, *topology.descendants(api.tree(), api.name)]
    return [Schedule.model_validate(r) for r in await api.loose_ends.schedules_for(scope)]


@AGENT_TABLE.on(CancelScheduleReq)
async def _cancel_schedule(api: AgentApi, req: CancelScheduleReq) -> Cancelled:
    row = await api.loose_ends.schedule_row(req.schedule_id)
    if row is None:
        raise NotFound(f"no schedule #{req.schedule_id}")
    owner = row.owner
    if owner != api.name and not topology.is_descendant_of(api.tree(), owner, api.name):
        # Moderation runs downward only: a target cannot cancel what its parent set.
        raise PermissionDenied(
            f"schedule #{req.schedule_id} was set by {owner}; only its owner or the "
            "owner's ancestors may cancel it (not a descendant)"
        )
    if row.cancelled_at is not None:
        raise Conflict(f"schedule #{req.schedule_id} is already cancelled")
    return Cancelled(cancelled=await api.loose_ends.cancel("schedule", req.schedule_id))
