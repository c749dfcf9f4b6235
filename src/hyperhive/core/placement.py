"""Putting agents on hosts: activation with the applied config, and what a host's
arrival or loss means for the agents it should run."""

from __future__ import annotations

import logging

import stamina

from hyperhive import topology
from hyperhive.core.agent_state import AgentState
from hyperhive.core.hostlink import HostLink
from hyperhive.core.notices import Notices
from hyperhive.core.registry import AgentRegistry
from hyperhive.errors import Unavailable
from hyperhive.protocol import ActivateCmd, ContainerCrash
from hyperhive.topology import TopologyStore

__all__ = ["Placement"]

log = logging.getLogger(__name__)


class Placement:
    def __init__(
        self,
        registry: AgentRegistry,
        topology_store: TopologyStore,
        hostlink: HostLink,
        agent_state: AgentState,
        notices: Notices,
    ) -> None:
        self.registry = registry
        self.topology_store = topology_store
        self.hostlink = hostlink
        self.agent_state = agent_state
        self.notices = notices
        # The last crash reason of agents not running again yet (for views).
        self.crash_reasons: dict[str, str] = {}

    async def activate(self, name: str) -> None:
        """Start ``name`` on a host as a new incarnation, with its applied config."""
        self.crash_reasons.pop(name, None)
        row = await self.agent_state.row(name)
        topo = self.topology_store.read_cached()
        await self.hostlink.activate(
            ActivateCmd(
                cmd="activate",
                agent=name,
                config=self.registry.config(name),
                parent=topo.get(name),
                descendants=topology.descendants(topo, name),
                incarnation=row.incarnation + 1,
            )
        )

    async def host_registered(self, host_id: str) -> None:
        """A host came (back): start every agent that should run and does not."""
        # The store may be away (a database restart, a failover): wait for it with
        # jittered backoff rather than drop the host or take the coordinator down.
        # Activating is idempotent, so a retry after a partial pass is safe.
        async for attempt in stamina.retry_context(
            on=Unavailable, attempts=None, timeout=None, wait_initial=0.5, wait_max=5.0
        ):
            with attempt:
                try:
                    desired = await self.agent_state.all_desired_running()
                    for name in sorted(self.registry.configs):
                        if name in desired and not self.hostlink.running(name):
                            await self.activate(name)
                except Unavailable as exc:
                    log.warning("agent host %s: cannot activate agents yet: %s", host_id, exc)
                    raise

    async def host_lost(self, agents: list[str]) -> None:
        # They come back when a host registers again (hivectl up restarts it).
        for agent in agents:
            self.crash_reasons[agent] = "its agent host died"
            log.warning("agent %s stopped with its host", agent)
            try:
                await self.notices.notify_submitter(
                    agent, ContainerCrash(agent=agent, reason="its agent host died")
                )
            except Unavailable as exc:  # the store is away: say so, stay up
                log.warning("could not tell %s's submitter that it stopped: %s", agent, exc)
