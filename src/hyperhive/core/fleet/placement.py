"""Putting agents on hosts: which host (durable assignments, pins, the rules of
``core.placing``), activation with the applied config, and what a host's arrival
or loss means for the agents it should run."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

import stamina

from hyperhive import topology
from hyperhive.core.fleet.hostlink import HostLink
from hyperhive.core.mail.notices import Notices
from hyperhive.core.state.agent_state import AgentState
from hyperhive.core.state.placing import HostLoad, capacity_of, choose_host
from hyperhive.core.state.registry import AgentRegistry
from hyperhive.errors import Conflict, HiveError, NotFound, Unavailable
from hyperhive.netlink import lease
from hyperhive.protocol import ActivateCmd, HostLost, LostAgent
from hyperhive.store.base import HostRepo, PlacementRepo
from hyperhive.store.rows import Assignment
from hyperhive.topology import TopologyStore

__all__ = ["MOVING_PHASES", "Placement", "PlacementWait"]

log = logging.getLogger(__name__)

# A lost host's notice names this many agents, then counts the rest.
NOTICE_AGENTS = 20


class PlacementWait(Unavailable):
    """The agent cannot start now for a reason of placement (its host is away, no host
    has room), not because the store is."""


# Phases of a move during which the agent runs nowhere (it is being copied).
MOVING_PHASES = frozenset({"draining", "copying"})


class Placement:
    def __init__(
        self,
        registry: AgentRegistry,
        topology_store: TopologyStore,
        hostlink: HostLink,
        agent_state: AgentState,
        notices: Notices,
        assignments: PlacementRepo,
        hosts: HostRepo,
    ) -> None:
        self.registry = registry
        self.topology_store = topology_store
        self.hostlink = hostlink
        self.agent_state = agent_state
        self.notices = notices
        self.assignments = assignments
        self.hosts = hosts
        # The last crash reason of agents not running again yet (for views).
        self.crash_reasons: dict[str, str] = {}
        # Told of each activation: the agent's sandbox is built afresh (config mirrors).
        self.on_activated: Callable[[], None] = lambda: None
        # Agents being started by someone now: a host registration's pass, or a spawn.
        # Two hosts registering together each found an agent not running yet, and both
        # started it: two runtimes, the first a ghost on its host. A pass claims an agent
        # before its first await, so another pass skips it (the passes run on the hosts'
        # link readers: no lock that blocks one).
        self._starting: Counter[str] = Counter()

    def note_crash(self, agent: str, reason: str) -> None:
        """``agent`` stopped unasked, for ``reason`` (shown until it runs again)."""
        self.crash_reasons[agent] = reason

    def crash_reason(self, agent: str) -> str | None:
        """Why ``agent`` last stopped unasked, until it runs again (``None``: it did not)."""
        return self.crash_reasons.get(agent)

    # ---- which host -------------------------------------------------------------------

    async def loads(self) -> list[HostLoad]:
        """Every connected host's capacity and the agents assigned to it."""
        counts = await self.assignments.per_host()
        return [
            capacity_of(name, self.hostlink.capacity_report(name), counts.get(name, 0))
            for name in self.hostlink.connected_hosts()
        ]

    async def check_pin(self, host: str) -> None:
        """Refuse a ``--host`` that names no agent host the operator added (or revoked)."""
        row = await self.hosts.get(host)
        if row is None and not self.hostlink.connected(host):
            raise NotFound(
                f"no agent host named {host!r}; `hivectl hosts list` shows them "
                "(`hivectl hosts add` registers one)"
            )
        if row is not None and row.revoked:
            raise Conflict(
                f"agent host {host!r} is revoked; `hivectl hosts rotate {host}` re-admits it"
            )

    async def pin(self, agent: str, host: str) -> None:
        """The operator's choice: ``agent`` runs on ``host`` only, and waits for it."""
        await self.check_pin(host)
        await self.assignments.assign(agent, host, pinned=True)

    async def _waits_for(self, assigned: Assignment) -> bool:
        """Does an agent whose host is not connected wait for it (rather than be placed
        anew)? Pinned ones do, and so do those on a remote host the operator added: their
        files are on its disk. A local host's name is per process, so it never returns."""
        if assigned.pinned:
            return True
        row = await self.hosts.get(assigned.host)
        return row is not None and not row.revoked

    async def host_for(self, name: str) -> str:
        """The host ``name`` runs on: its assignment, else a new one by the rules."""
        assigned = await self.assignments.get(name)
        if assigned is not None and assigned.move_phase in MOVING_PHASES:
            raise Conflict(
                f"{name} is moving from {assigned.move_from} to {assigned.move_to}; it starts "
                "on one of them when the move ends"
            )
        if assigned is not None:
            if self.hostlink.connected(assigned.host):
                return assigned.host
            if await self._waits_for(assigned):
                raise PlacementWait(
                    f"{name} is {'pinned' if assigned.pinned else 'assigned'} to agent host "
                    f"{assigned.host!r}, which is not connected; it starts when that host "
                    "connects"
                )
        parent = self.topology_store.read_cached().get(name)
        parent_host = None
        if parent is not None:
            parent_row = await self.assignments.get(parent)
            parent_host = parent_row.host if parent_row is not None else None
        chosen = choose_host(await self.loads(), parent_host)
        if chosen is None:
            raise PlacementWait(
                f"no connected agent host has room for {name}; add a host or raise a host's "
                "max_agents"
            )
        await self.assignments.assign(name, chosen, pinned=False)
        return chosen

    # ---- activation -------------------------------------------------------------------

    @contextmanager
    def starting(self, name: str) -> Iterator[None]:
        """Claim ``name`` for the block: a host registration's pass leaves it alone (its
        claimant starts it). Claim before the first await that follows the check."""
        self._starting[name] += 1
        try:
            yield
        finally:
            self._starting[name] -= 1
            if not self._starting[name]:
                del self._starting[name]

    async def activate(self, name: str, host: str | None = None, *, restore: bool = False) -> None:
        """Start ``name`` as a new incarnation, with its applied config: on ``host`` (it is
        assigned there, keeping its pin), else on the host placement gives it.
        ``restore``: a replacement, which restores its last snapshot there first."""
        if host is None:
            host = await self.host_for(name)
        else:
            assigned = await self.assignments.get(name)
            if assigned is None or assigned.host != host:
                pinned = assigned.pinned if assigned is not None else False
                await self.assignments.assign(name, host, pinned=pinned)
        await self.activate_on(name, host, restore=restore)

    async def replace(self, name: str, exclude: set[str]) -> str | None:
        """Re-place ``name`` (its host is lost, ``on_host_loss = "replace"``) on another
        host by the placement rules; ``None``: no other host has room (or it is pinned)."""
        assigned = await self.assignments.get(name)
        if assigned is not None and assigned.pinned:
            return None  # a pin waits for its host
        parent = self.topology_store.read_cached().get(name)
        parent_row = await self.assignments.get(parent) if parent is not None else None
        loads = [h for h in await self.loads() if h.name not in exclude]
        target = choose_host(loads, parent_row.host if parent_row is not None else None)
        if target is not None:
            # No shared disk: its last snapshot (state/, claude session) goes with it.
            await self.activate(name, host=target, restore=True)
        return target

    async def activate_on(self, name: str, host: str, *, restore: bool = False) -> None:
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
                restore=restore,
            ),
            host,
        )
        self.on_activated()

    async def forget(self, name: str) -> None:
        await self.assignments.forget(name)

    async def host_registered(self, host_id: str) -> None:
        """A host came (back): start every agent that should run and does not — except one
        lost with another host that waits for it (``on_host_loss = "wait"``). What this
        host was lost with, or says it still runs, starts on it."""
        # The store may be away (a database restart, a failover): wait for it with
        # jittered backoff rather than drop the host or take the coordinator down.
        # Activating is idempotent, so a retry after a partial pass is safe; the retries
        # end with the host's connection.
        async for attempt in stamina.retry_context(
            on=Unavailable, attempts=None, timeout=None, wait_initial=0.5, wait_max=5.0
        ):
            if not self.hostlink.connected(host_id):
                return  # gone again: its next registration starts this over
            with attempt:
                await self._start_missing(host_id)

    async def _start_missing(self, host_id: str) -> None:
        """One pass of :meth:`host_registered`."""
        try:
            desired = await self.agent_state.all_desired_running()
            for name in self.registry.configured():
                if name not in desired or self.hostlink.running(name) or name in self._starting:
                    continue
                with self.starting(name):
                    await self._start_one(name, host_id)
        except Unavailable as exc:
            log.warning("agent host %s: cannot activate agents yet: %s", host_id, exc)
            raise

    async def _start_one(self, name: str, host_id: str) -> None:
        lost_on = self.hostlink.lost_on(name)
        if lost_on == host_id or self.hostlink.reported_running(host_id, name):
            # Back where its disk is (or adopted where it still runs).
            await self.activate(name, host=host_id)
        elif lost_on is None:
            await self.try_activate(name)
        elif self._policy(name) == "replace":
            await self.replace(name, exclude={lost_on})

    async def restore_leases(self) -> None:
        """Before the link serves: hold what the store says remote hosts hold under their
        leases (a previous coordinator's, before a restart or failover), so a host that
        died with it is found lost when its lease runs out, without ever dialling in."""
        moving = {a.agent for a in await self.assignments.all() if a.move_phase in MOVING_PHASES}
        assigned = {a.agent: a.host for a in await self.assignments.all() if a.agent not in moving}
        desired = await self.agent_state.all_desired_running() & set(self.registry.configured())
        held = [
            lease.HeldLease(r.name, r.epoch, r.lease_expires_at, r.lost_epoch, r.revoked)
            for r in await self.hosts.list()
        ]
        restored = lease.restore(held, assigned, desired)
        self.hostlink.restore(restored)
        for agent, host in restored.lost.items():
            self.crash_reasons.setdefault(agent, f"lost: agent host {host}'s lease expired")
            log.info("%s was lost with agent host %s before this coordinator", agent, host)
        for host, agents in restored.holds.items():
            log.info(
                "agent host %s holds %s under its lease (until %s) until it dials in",
                host,
                ", ".join(agents) or "no agents",
                restored.away[host].expires_at,
            )

    async def try_activate(self, name: str) -> bool:
        """Activate ``name`` unless placement says later (it is moving, its host is away,
        no host has room: logged); the store being away still raises."""
        try:
            await self.activate(name)
        except (Conflict, PlacementWait) as exc:
            log.info("%s does not start now: %s", name, exc.message)
            return False
        return True

    def _policy(self, name: str) -> str:
        config = self.registry.applied(name)
        return config.on_host_loss if config is not None else "wait"

    async def host_lost(self, host_id: str, agents: list[str], lease_expired: bool) -> None:
        """A host went (its local link ended) or its lease expired (its agents are lost).

        Each manager hears of it once, listing its agents: one notice per host
        loss, not a turn per agent."""
        if lease_expired:
            await self._lost(host_id, agents)
            return
        # They come back when a host registers again (hivectl up restarts it).
        for agent in agents:
            self.crash_reasons[agent] = "its agent host died"
            log.warning("agent %s stopped with its host", agent)
        await self._tell(host_id, "died", [LostAgent(agent=a) for a in agents])

    async def _lost(self, host_id: str, agents: list[str]) -> None:
        told: list[str] = []
        lost: list[LostAgent] = []
        for agent in agents:
            reason = f"lost: agent host {host_id}'s lease expired"
            target = None
            item = LostAgent(agent=agent)
            if self._policy(agent) == "replace":
                try:
                    target = await self.replace(agent, exclude={host_id})
                    if target is not None:
                        reason += (
                            f"; re-placed on {target} with its config, its inbox and the "
                            "snapshot of its state/ notes and claude session from its last turn"
                        )
                        item = LostAgent(agent=agent, outcome="replaced", host=target)
                except Unavailable as exc:
                    target = None
                    log.warning("could not re-place %s: %s", agent, exc)
                if target is None:
                    reason += "; on_host_loss = replace, but no other host is connected yet"
                    item = LostAgent(agent=agent, outcome="stuck")
            else:
                reason += f"; it waits for {host_id} to come back (on_host_loss = wait)"
            self.crash_reasons[agent] = reason
            told.append(f"{agent} ({reason})")
            lost.append(item)
        await self._tell(host_id, "lease_expired", lost)
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

    async def _tell(
        self, host_id: str, cause: Literal["died", "lease_expired"], lost: list[LostAgent]
    ) -> None:
        """One ``host_lost`` notice per manager, naming its agents of ``lost``."""
        by_agent = {item.agent: item for item in lost}
        for submitter, agents in self.notices.submitters_of(by_agent).items():
            event = HostLost(host=host_id, cause=cause, agents=[by_agent[a] for a in agents])
            try:
                await self.notices.notify_agent(submitter, event)
            except Unavailable as exc:  # the store is away: say so, stay up
                log.warning("could not tell %s that host %s went: %s", submitter, host_id, exc)
