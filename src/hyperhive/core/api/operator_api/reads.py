"""What the operator reads of its agents and its hive: the agents view, an agent's forge
view, last snapshot, log and live turn state, and the hive's status."""

from __future__ import annotations

from hyperhive import topology
from hyperhive.core.api.operator_api.base import OPERATOR_TABLE, OperatorApi
from hyperhive.forge.view import forge_view
from hyperhive.permissions import ToolGroup
from hyperhive.protocol import (
    AgentView,
    ForgeView,
    HiveStatus,
    LastSnapshot,
    LogTail,
    OpAgentForgeReq,
    OpAgentSnapshotReq,
    OpAgentsReq,
    OpLastSnapshotReq,
    OpLogsReq,
    OpStatusReq,
    WaitingSlot,
)
from hyperhive.protocol.hostreads import AgentSnapshot

__all__: list[str] = []


@OPERATOR_TABLE.on(OpAgentsReq)
async def _agents(api: OperatorApi, req: OpAgentsReq) -> list[AgentView]:
    return await api.agents_view()


@OPERATOR_TABLE.on(OpAgentForgeReq)
async def _agent_forge(api: OperatorApi, req: OpAgentForgeReq) -> ForgeView:
    config = api.registry.config(req.agent)
    granted = ToolGroup.FORGE in config.tool_groups
    return await forge_view(api.forge, req.agent, granted)


@OPERATOR_TABLE.on(OpLastSnapshotReq)
async def _last_snapshot(api: OperatorApi, req: OpLastSnapshotReq) -> LastSnapshot:
    head = await api.agent_state.last_snapshot(req.agent)
    if head is None:
        return LastSnapshot()
    return LastSnapshot(
        host=head.host,
        taken_at=head.taken_at,
        size=head.size,
        raw_bytes=head.raw_bytes,
        files=head.files,
    )


@OPERATOR_TABLE.on(OpLogsReq)
async def _logs(api: OperatorApi, req: OpLogsReq) -> LogTail:
    api.registry.require(req.agent)
    return await api.logs.agent(req.agent, req.lines, req.after, req.wait)


@OPERATOR_TABLE.on(OpAgentSnapshotReq)
async def _agent_snapshot(api: OperatorApi, req: OpAgentSnapshotReq) -> AgentSnapshot:
    api.registry.require(req.agent)
    return await api.hostlink.snapshot(req.agent)


@OPERATOR_TABLE.on(OpStatusReq)
async def _status(api: OperatorApi, req: OpStatusReq) -> HiveStatus:
    topo = api.topology_store.read_cached()
    return HiveStatus(
        home=str(api.paths.home),
        agents=len(api.registry.known()),
        running=sum(api.hostlink.running(a) for a in api.registry.known()),
        hosts=api.hostlink.connected_hosts(),
        claude_slots=api.hostlink.claude_slots(),
        waiting_slot=[
            WaitingSlot(agent=agent, since=since)
            for agent, since in api.hostlink.waiting_for_slots()
        ],
        lost=api.hostlink.lost_agents(),
        roots=topology.roots(topo),
        schema_version=api.schema_version,
        pid=api.pid,
    )
