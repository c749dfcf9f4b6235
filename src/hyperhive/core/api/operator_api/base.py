"""What the operator may ask, on ``run/host.sock`` (``hivectl``, dashboard): the context
every handler gets, and the agents view.

The operator is trusted with the whole hive, but requests are still typed
and every refusal of the shared rules (unknown names, cycles) reaches the
operator verbatim. The handlers live beside this module, one module per
concern, each registered on ``OPERATOR_TABLE``.
"""

from __future__ import annotations

import os
from typing import Any

from hyperhive.budgets import describe
from hyperhive.config import HivePaths
from hyperhive.core.api.watch import OperatorWatch
from hyperhive.core.fleet.parts import Fleet
from hyperhive.core.infra.notify import EventBus
from hyperhive.core.mail.parts import Mail
from hyperhive.core.ops.parts import Ops
from hyperhive.core.state.parts import HiveState
from hyperhive.dispatch import Dispatcher
from hyperhive.forge.config import ForgeConfig
from hyperhive.protocol import AgentView, HostRequest, Versions
from hyperhive.store.rows import AgentState as AgentStateRow

__all__ = ["OPERATOR_TABLE", "OperatorApi"]

# Each concern's module registers its handlers here; the package seals the table.
OPERATOR_TABLE: Dispatcher[OperatorApi] = Dispatcher("operator socket", HostRequest)


class OperatorApi:
    """The handlers' context behind ``run/host.sock``: the services they ask."""

    def __init__(
        self,
        *,
        paths: HivePaths,
        schema_version: int,
        state: HiveState,
        mail: Mail,
        fleet: Fleet,
        ops: Ops,
        bus: EventBus,
        forge: ForgeConfig | None,
        watch: OperatorWatch,
    ) -> None:
        self.paths = paths
        self.schema_version = schema_version
        self.registry = state.registry
        self.topology_store = state.topology
        self.mirror = state.mirror
        self.broker = mail.broker
        self.loose_ends = mail.loose_ends
        self.scheduler = mail.scheduler
        self.agent_state = state.agent_state
        self.mover = fleet.mover
        self.approvals = ops.approvals
        self.lifecycle = ops.lifecycle
        self.placement = fleet.placement
        self.logs = fleet.logs
        self.hostlink = fleet.hostlink
        self.bus = bus
        self.forge = forge
        self.host_admin = fleet.host_admin
        self.budgets = mail.budgets
        self.turns = fleet.turns
        self.watch = watch
        self.pid = os.getpid()

    async def __call__(self, req: Any) -> Any:
        return await OPERATOR_TABLE(self, req)

    async def agents_view(self) -> list[AgentView]:
        topo = self.topology_store.read_cached()
        rows = await self.agent_state.all_rows()
        unread = await self.agent_state.unread_by_operator()
        assigned = {a.agent: a for a in await self.placement.assignments.all()}
        out = []
        for name in self.registry.known():
            row = rows.get(name) or AgentStateRow(name=name)
            turn = self.hostlink.turn_of(name)
            held = await self.budgets.held(name)
            where = assigned.get(name)
            out.append(
                AgentView(
                    name=name,
                    parent=topo.get(name),
                    running=self.hostlink.running(name),
                    host=self.hostlink.host_of(name),
                    turn_state=turn.state if turn else "stopped",
                    turn_state_since=turn.since if turn else None,
                    status_text=row.status_text,
                    needs_login=row.needs_login,
                    over_budget=describe(held) if held else None,
                    broken=self.registry.broken(name),
                    launch_problem=turn.launch_problem if turn else None,
                    crashed=self.placement.crash_reason(name),
                    unread_operator_messages=unread.get(name, 0),
                    last_context_usage=row.last_context_usage,
                    config_warnings=self.registry.warnings(name),
                    assigned_host=where.host if where else None,
                    pinned=where.pinned if where else False,
                    move_to=where.move_to if where else None,
                    move_phase=where.move_phase if where else None,
                    lost_on=self.hostlink.lost_on(name),
                    desired_running=row.desired_running,
                    versions=(
                        Versions(hive=row.started_hive, claude=row.started_claude)
                        if row.started_hive is not None
                        else None
                    ),
                    needs_update=row.needs_update,
                )
            )
        return out
