"""What an agent may do to the agents it manages: propose configs, start and stop
them, and read their logs, deploy history, turns and its host's journal."""

from __future__ import annotations

import re

from hyperhive.core.api.agent_api.base import AGENT_TABLE, AgentApi
from hyperhive.errors import NotFound
from hyperhive.protocol import (
    ApprovalRequested,
    Deployed,
    DeployLogEntry,
    GetDeployedReq,
    GetHostJournalReq,
    GetLogsReq,
    GetTurnsReq,
    HostJournal,
    LifecycleReq,
    LifecycleResult,
    LogTail,
    RequestApplyCommitReq,
    RequestInitConfigReq,
    TurnsView,
)
from hyperhive.protocol.turns import TURN_ID, agent_of_turn

__all__: list[str] = []


@AGENT_TABLE.on(RequestInitConfigReq)
async def _request_init_config(api: AgentApi, req: RequestInitConfigReq) -> ApprovalRequested:
    return await api.approvals.request_init_config(api.name, req.name, req.config)


@AGENT_TABLE.on(RequestApplyCommitReq)
async def _request_apply_commit(api: AgentApi, req: RequestApplyCommitReq) -> ApprovalRequested:
    return await api.approvals.request_apply_commit(api.name, req.agent, req.commit)


@AGENT_TABLE.on(LifecycleReq)
async def _lifecycle(api: AgentApi, req: LifecycleReq) -> LifecycleResult:
    return await api.lifecycle.act(api.name, req.cmd, req.agent)


@AGENT_TABLE.on(GetLogsReq)
async def _get_logs(api: AgentApi, req: GetLogsReq) -> LogTail:
    api.lifecycle.check_manage(api.name, "get_logs", req.agent)
    return await api.logs.agent(req.agent, req.lines)


@AGENT_TABLE.on(GetDeployedReq)
async def _get_deployed(api: AgentApi, req: GetDeployedReq) -> Deployed:
    api.lifecycle.check_manage(api.name, "get_deployed", req.agent)
    entries = await api.registry.history(req.agent, req.entries)
    return Deployed(
        agent=req.agent,
        config=api.registry.text(req.agent),
        broken=api.registry.broken(req.agent),
        log=[
            DeployLogEntry(seq=e.seq, at=e.at, action=e.action, message=e.message) for e in entries
        ],
    )


@AGENT_TABLE.on(GetTurnsReq)
async def _get_turns(api: AgentApi, req: GetTurnsReq) -> TurnsView:
    # Its own, or a descendant's (a manager reviewing its children): the topology
    # decides here, from the socket's agent, never from the request.
    agent = req.agent or api.name
    if req.turn is not None:
        agent = agent_of_turn(req.turn)
    if agent != api.name:
        api.lifecycle.check_manage(api.name, "get_turns", agent)
    if req.turn is not None:
        if not re.match(TURN_ID, req.turn):
            raise NotFound(f"no turn {req.turn}: a turn id is <agent>.<time>-<random>")
        return TurnsView(record=await api.turns.show(req.turn, -1, False))
    if req.search is not None:
        return TurnsView(hits=await api.turns.search(req.search, agent, req.limit))
    return TurnsView(turns=await api.turns.list_turns(agent, None, req.limit))


@AGENT_TABLE.on(GetHostJournalReq)
async def _get_host_journal(api: AgentApi, req: GetHostJournalReq) -> HostJournal:
    return await api.logs.host_journal(api.name, req.lines)
