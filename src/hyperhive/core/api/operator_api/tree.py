"""The agent tree and its lifecycle: the topology, a parent changed, an agent spawned,
started, stopped or destroyed, and moved to another host."""

from __future__ import annotations

from hyperhive.core.api.operator_api.base import OPERATOR_TABLE, OperatorApi
from hyperhive.errors import Conflict
from hyperhive.names import validate_agent_name
from hyperhive.protocol import (
    LifecycleResult,
    Moved,
    MoveProgress,
    OpAgentMoveReq,
    OpLifecycleReq,
    OpMoveProgressReq,
    OpSetParentReq,
    OpSpawnReq,
    OpTopologyReq,
    ParentSet,
    SpawnResult,
)

__all__: list[str] = []


@OPERATOR_TABLE.on(OpTopologyReq)
async def _topology(api: OperatorApi, req: OpTopologyReq) -> dict[str, str | None]:
    return api.topology_store.read_cached()


@OPERATOR_TABLE.on(OpSetParentReq)
async def _set_parent(api: OperatorApi, req: OpSetParentReq) -> ParentSet:
    updated, changed = await api.lifecycle.set_parent(req.child, req.new_parent or None)
    return ParentSet(changed=changed, topology=updated)


@OPERATOR_TABLE.on(OpSpawnReq)
async def _spawn(api: OperatorApi, req: OpSpawnReq) -> SpawnResult:
    validate_agent_name(req.name)
    if api.registry.exists(req.name):
        raise Conflict(f"an agent named {req.name!r} already exists")
    if req.parent is not None:
        api.registry.require(req.parent)
    await api.lifecycle.create(
        req.name, req.config, req.parent, f"spawn {req.name} (operator)", host=req.host
    )
    return SpawnResult(name=req.name, parent=req.parent, running=api.hostlink.running(req.name))


@OPERATOR_TABLE.on(OpLifecycleReq)
async def _lifecycle(api: OperatorApi, req: OpLifecycleReq) -> LifecycleResult:
    return await api.lifecycle.act(None, req.cmd.removeprefix("agent_"), req.agent)


@OPERATOR_TABLE.on(OpAgentMoveReq)
async def _move(api: OperatorApi, req: OpAgentMoveReq) -> Moved:
    return await api.mover.move(req.agent, req.to)


@OPERATOR_TABLE.on(OpMoveProgressReq)
async def _move_progress(api: OperatorApi, req: OpMoveProgressReq) -> MoveProgress:
    api.registry.require(req.agent)
    return await api.mover.progress(req.agent, req.after, req.wait)
