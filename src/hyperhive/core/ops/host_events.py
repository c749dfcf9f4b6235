"""What the hive does when an agent host registers, is lost, or reports a crash.

The host link (``core.fleet.hostlink``) sits below the services that decide these
things, so it tells them through ``core.infra.linked_host.HostEvents``, which this
class implements; the coordinator hands it to the link once both are built.
"""

from __future__ import annotations

from hyperhive.core.fleet.configmirrors import ConfigMirrors
from hyperhive.core.fleet.parts import Fleet
from hyperhive.core.infra.background import Background
from hyperhive.core.ops.lifecycle import Lifecycle
from hyperhive.core.state.parts import HiveState

__all__ = ["HostEventHandlers"]


class HostEventHandlers:
    """Moves, placement, disks and config mirrors on a registration; placement and the
    feed on a loss; the lifecycle's restart on a crash."""

    def __init__(
        self,
        state: HiveState,
        fleet: Fleet,
        lifecycle: Lifecycle,
        mirrors: ConfigMirrors,
        background: Background,
    ) -> None:
        self.registry = state.registry
        self.activity = state.agent_state.activity
        self.mover = fleet.mover
        self.placement = fleet.placement
        self.disks = fleet.disks
        self.lifecycle = lifecycle
        self.mirrors = mirrors
        self.background = background

    async def host_registered(self, host_id: str) -> None:
        # Moves first: an unfinished one is undone before its agent is started again.
        await self.mover.host_registered(host_id)
        await self.placement.host_registered(host_id)
        # Then (its agents placed) trash that waited for it, repos it lacks, their ACLs:
        # asks of the host, so off this call, made from its connection's reader, which
        # must go on reading the answers.
        self.background.start_soon(self._disk_registered, host_id)

    async def _disk_registered(self, host_id: str) -> None:
        await self.disks.host_registered(host_id, self.registry.texts())
        # Its repos seeded: the mirrors it keeps of others', and others keep of its.
        self.mirrors.host_registered(host_id)

    async def agent_crashed(self, agent: str, reason: str) -> None:
        await self.lifecycle.crashed(agent, reason)

    async def host_lost(self, host_id: str, agents: list[str], lease_expired: bool) -> None:
        """Placement decides what runs where now; the feed shows each agent stopping."""
        try:
            await self.placement.host_lost(host_id, agents, lease_expired)
        finally:
            for agent in agents:
                reason = self.placement.crash_reason(agent) or f"agent host {host_id} went"
                await self.activity.record(
                    "crash",
                    agent,
                    f"{agent} stopped: {reason}",
                    others=[],
                    detail={"reason": reason, "host": host_id, "lease_expired": lease_expired},
                )
