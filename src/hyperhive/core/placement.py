"""Putting agents on hosts: activation with the applied config, and what a host's
arrival or loss means for the agents it should run."""

from __future__ import annotations

import logging
from collections.abc import Collection

import stamina

from hyperhive import topology
from hyperhive.core.agent_state import AgentState
from hyperhive.core.hostlink import HostLink
from hyperhive.core.notices import Notices
from hyperhive.core.registry import AgentRegistry
from hyperhive.errors import HiveError, Unavailable
from hyperhive.protocol import ActivateCmd, ContainerCrash
from hyperhive.topology import TopologyStore

__all__ = ["Placement", "choose_host"]

log = logging.getLogger(__name__)

# A lost host's notice names this many agents, then counts the rest.
NOTICE_AGENTS = 20


def choose_host(link: HostLink, agent: str, exclude: Collection[str] = ()) -> str | None:
    """The connected host ``agent`` should start on (``None``: there is none): the
    least loaded, leaving out ``exclude``."""
    candidates = [h for h in sorted(link.hosts) if h not in exclude]
    return min(candidates, key=lambda h: len(link.hosts[h].agents), default=None)


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

    async def activate(self, name: str, host: str | None = None) -> None:
        """Start ``name`` on a host (``host``, else where the link puts it) as a new
        incarnation, with its applied config."""
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
            ),
            host=host,
        )

    async def host_registered(self, host_id: str) -> None:
        """A host came (back): start every agent that should run and does not — except one
        lost with another host that waits for it (``on_host_loss = "wait"``). What this
        host was lost with, or says it still runs, starts on it."""
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
                        if name not in desired or self.hostlink.running(name):
                            continue
                        lost_on = self.hostlink.lost.get(name)
                        host = self.hostlink.hosts.get(host_id)
                        if lost_on == host_id or (host is not None and name in host.reported):
                            # Back where its disk is (or adopted where it still runs).
                            await self.activate(name, host=host_id)
                        elif lost_on is None or self._policy(name) == "replace":
                            await self.activate(name)
                except Unavailable as exc:
                    log.warning("agent host %s: cannot activate agents yet: %s", host_id, exc)
                    raise

    def _policy(self, name: str) -> str:
        config = self.registry.configs.get(name)
        return config.on_host_loss if config is not None else "wait"

    async def host_lost(self, host_id: str, agents: list[str], lease_expired: bool) -> None:
        """A host went (its local link ended) or its lease expired (its agents are lost)."""
        if lease_expired:
            await self._lost(host_id, agents)
            return
        # They come back when a host registers again (hivectl up restarts it).
        for agent in agents:
            self.crash_reasons[agent] = "its agent host died"
            log.warning("agent %s stopped with its host", agent)
            await self._tell(agent, "its agent host died")

    async def _lost(self, host_id: str, agents: list[str]) -> None:
        told: list[str] = []
        for agent in agents:
            reason = f"lost: agent host {host_id}'s lease expired"
            target = None
            if self._policy(agent) == "replace":
                target = choose_host(self.hostlink, agent, exclude={host_id})
                if target is not None:
                    try:
                        await self.activate(agent, host=target)
                        reason += (
                            f"; re-placed on {target}, fresh from its config and inbox (its "
                            f"state/ notes and claude session stay on {host_id}'s disk)"
                        )
                    except Unavailable as exc:
                        target = None
                        log.warning("could not re-place %s: %s", agent, exc)
                if target is None:
                    reason += "; on_host_loss = replace, but no other host is connected yet"
            else:
                reason += f"; it waits for {host_id} to come back (on_host_loss = wait)"
            self.crash_reasons[agent] = reason
            told.append(f"{agent} ({reason})")
            await self._tell(agent, reason)
        if told:
            more = f"; and {len(told) - NOTICE_AGENTS} more" if len(told) > NOTICE_AGENTS else ""
            try:
                await self.notices.notify_operator(
                    f"agent host {host_id}'s lease expired: "
                    + "; ".join(told[:NOTICE_AGENTS])
                    + more
                    + " (`hivectl hosts list` shows the host)"
                )
            except HiveError as exc:
                log.warning("could not tell the operator host %s is lost: %s", host_id, exc)

    async def _tell(self, agent: str, reason: str) -> None:
        try:
            await self.notices.notify_submitter(agent, ContainerCrash(agent=agent, reason=reason))
        except Unavailable as exc:  # the store is away: say so, stay up
            log.warning("could not tell %s's submitter that it stopped: %s", agent, exc)
