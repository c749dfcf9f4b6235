"""Agent lifecycle: create, apply, kill/start/restart/update/destroy, crash watch.

Who may act on whom is the topology's target table (``may_manage``,
``may_destroy``), checked here for agents and skipped for the operator.
Every apply is an entry in the store's deploy log (mirrored to the meta
repo as a commit), followed by a reconcile of the tree and a rebuild of
the agent. A crashed agent is restarted with backoff
(its unacked mail redelivers to the new incarnation) and the submitting
agent hears about it; the root manager just restarts.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable

import anyio
import stamina

from hyperhive import topology
from hyperhive.config import AgentConfig, HiveConfig, HivePaths, dump_agent_config
from hyperhive.core.fleet.parts import Fleet
from hyperhive.core.infra.parts import Infra
from hyperhive.core.mail.notices import Notices
from hyperhive.core.state.parts import HiveState
from hyperhive.errors import Conflict, HiveError, PermissionDenied, Unavailable
from hyperhive.forge.service import revoke_agent
from hyperhive.matrix.admin import deactivate_agent, sign_out_agent
from hyperhive.permissions import ToolGroup
from hyperhive.protocol import (
    AgentDestroyed,
    AgentRunning,
    AgentStopped,
    ContainerCrash,
    Destroyed,
    Killed,
    LifecycleResult,
    PlaceCmd,
    Rebuilt,
)

__all__ = ["CRASH_BACKOFF", "Lifecycle"]

log = logging.getLogger(__name__)

CRASH_BACKOFF = (2.0, 4.0, 8.0, 16.0, 32.0, 60.0)
CRASH_WINDOW = 300.0  # crashes older than this no longer lengthen the backoff


class Lifecycle:
    def __init__(
        self,
        paths: HivePaths,
        config: HiveConfig,
        state: HiveState,
        fleet: Fleet,
        infra: Infra,
        notices: Notices,
        tree_changed: Callable[[], None] = lambda: None,
    ) -> None:
        self.paths = paths
        self.registry = state.registry
        self.topology_store = state.topology
        self.disks = fleet.disks
        self.mirror = state.mirror
        self.agent_state = state.agent_state
        self.placement = fleet.placement
        self.hostlink = fleet.hostlink
        self.notices = notices
        self.sockets = infra.sockets
        self.bus = infra.bus
        self.background = infra.background
        self.forge = config.forge
        self.matrix = config.matrix
        # Told when the tree changes (config mirrors follow who descends from whom).
        self.tree_changed = tree_changed
        self._crashes: dict[str, deque[float]] = {}

    # ---- rules ----------------------------------------------------------------------

    def check_manage(self, actor: str | None, verb: str, target: str) -> None:
        """``None`` is the operator, who may act on anyone."""
        self.registry.require(target)
        if actor is None:
            return
        topo = self.topology_store.read_cached()
        if verb == "destroy":
            if target == actor:
                raise PermissionDenied("an agent cannot destroy itself (self)")
            if topology.is_descendant_of(topo, actor, target):
                raise PermissionDenied(
                    f"{target} is your ancestor; it cannot be destroyed by you (an ancestor)"
                )
        if not topology.may_manage(topo, actor, target):
            raise PermissionDenied(
                f"{verb} {target}: {target} is not your descendant (not a descendant); "
                f"only {target}'s ancestors may"
            )

    # ---- applying configs ---------------------------------------------------------------

    async def create(
        self,
        name: str,
        config: AgentConfig,
        parent: str | None,
        message: str,
        host: str | None = None,
    ) -> str | None:
        """A new agent (or a re-init): proposed repo, applied config, tree edge, activation.

        ``host``: the operator's pin (checked before anything is made)."""
        existed = self.registry.exists(name)
        if not existed:
            await self.disks.check_no_pending_trash(name)
        # Claimed until this starts it: a host registering meanwhile found it written but
        # not started, started it itself (its socket not open yet: the harness's first
        # connection failed), and the rebuild below restarted it.
        with self.placement.starting(name):
            return await self._create(name, config, parent, message, host, existed)

    async def _create(
        self,
        name: str,
        config: AgentConfig,
        parent: str | None,
        message: str,
        host: str | None,
        existed: bool,
    ) -> str | None:
        if host is not None:
            # Pinned first: the agent's directories are made on the host it is pinned to.
            await self.placement.pin(name, host)
        text = dump_agent_config(config)
        # The edge before the config: cut short between the two, the next start's
        # reconcile drops the edge of an agent that never came to be, and the
        # approval (still pending) can be approved again.
        before = self.topology_store.read_cached()
        topo = topology.reconcile(before, [*self.registry.known(), name])
        if not existed:
            topo[name] = parent
        await self.topology_store.write(topo, message)
        # Its socket listens before anything can know it (and start it): one started
        # without one dials a socket that is not there.
        await self.sockets.open(name)
        try:
            await self.registry.write(name, config, message, action="init")
        except BaseException:
            if not existed:
                self.sockets.close(name)
            raise
        commit = await self.mirror.sync()
        await self.agent_state.row(name)
        self.bus.emit("topology", child=name, parent=topo.get(name))
        # Running ancestors hear of their new descendant now, not at their next start: its
        # config repo joins their sandboxes (spec 004: they may edit it) once it is seeded.
        for other, (up, below) in topology.places_changed(before, topo).items():
            if other != name:
                await self.hostlink.place(
                    PlaceCmd(cmd="place", agent=other, parent=up, descendants=list(below))
                )
        if not existed:
            by = topo.get(name)
            await self.agent_state.activity.record(
                "spawn",
                by or name,
                f"{name} spawned" + (f" under {by}" if by else " (a root)"),
                others=[name],
                detail={"agent": name, "parent": by},
            )
        await self.rebuild(name)
        # Placed now (or not, with no host): its dirs and config repo on that host, then
        # its ancestors' write access. Asks of the host, which a spawn does not wait on
        # (nor on a host at all: without one, the repo is seeded when it registers).
        self.background.start_soon(self._seed, name, text, message)
        return commit

    async def _seed(self, name: str, text: str, message: str) -> None:
        await self.disks.seed(name, text, message)
        await self.disks.sync_acls([name])
        self.tree_changed()

    async def apply(self, name: str, config: AgentConfig, message: str) -> str | None:
        """Apply a new config to an existing agent: log it, reconcile, rebuild."""
        before = self.registry.applied(name)
        await self.registry.write(name, config, message)
        await self.reconcile()
        commit = await self.mirror.sync()
        await self.rebuild(name)
        if (
            before is not None
            and ToolGroup.FORGE in before.tool_groups
            and ToolGroup.FORGE not in config.tool_groups
        ):
            # Losing the group must cost the forge identity too: its token still works
            # from the agent's state otherwise. Granting it again provisions afresh.
            await self._revoke_forge(name, "lost the forge group")
        if before is not None and before.matrix.enabled and not config.matrix.enabled:
            # Likewise its Matrix tokens (the account stays: enabling it signs in afresh).
            problem = await sign_out_agent(self.matrix, name)
            if problem is not None:
                log.error("%s lost [matrix]; its Matrix account: %s", name, problem)
        return commit

    async def _revoke_forge(self, name: str, why: str) -> None:
        problem = await revoke_agent(self.forge, name)
        if problem is not None:
            log.error("%s %s; its forge identity: %s", name, why, problem)

    async def rebuild(self, name: str) -> None:
        """Stop (gracefully) and start again with the applied config, if it should run."""
        if self.hostlink.running(name):
            await self.hostlink.deactivate(name, graceful=True)
        if await self.agent_state.desired_running(name) and self.hostlink.connected_hosts():
            await self.placement.try_activate(name)

    async def reconcile(self, note: str = "reconcile the tree with the agents") -> None:
        """Bring the tree in line with the agents that exist (spec "Reconcile")."""
        current = self.topology_store.read_cached()
        updated = topology.reconcile(current, self.registry.known())
        await self.topology_store.write(updated, note)

    async def set_parent(
        self, child: str, new_parent: str | None
    ) -> tuple[dict[str, str | None], bool]:
        """Move ``child`` (and its subtree) under ``new_parent``; running agents follow.

        The move is an entry in the store's deploy log (mirrored as a meta
        commit); the moved repos' ACLs follow the new ancestors; every running
        agent whose parent or descendants changed is told, so its next turn
        knows without a restart.
        """
        before = self.topology_store.read_cached()
        updated, changed = topology.apply_set_parent(
            before, child, new_parent, self.registry.known()
        )
        if not changed:
            return updated, False
        old = before.get(child)
        await self.topology_store.write(
            updated, f"reparent {child}: {old or '(root)'} -> {new_parent or '(root)'}"
        )
        moved = [child, *topology.descendants(updated, child)]
        self.background.start_soon(self.disks.sync_acls, moved)
        await self.mirror.sync()
        places = topology.places_changed(before, updated)
        for name, (parent, below) in places.items():
            await self.hostlink.place(
                PlaceCmd(cmd="place", agent=name, parent=parent, descendants=list(below))
            )
        # ... and taken: each one's next call (by another connection to its host) sees
        # its new place, as after a status change (the host takes its link's commands
        # in order, so this answer comes after the place).
        for name in places:
            await self.hostlink.meta_changed(name)
        self.bus.emit("topology", child=child, parent=new_parent)
        self.tree_changed()
        await self.agent_state.activity.record(
            "reparent",
            child,
            f"{child} moved: {old or '(root)'} → {new_parent or '(root)'}",
            others=[p for p in (old, new_parent) if p],
            detail={"from": old, "to": new_parent},
        )
        return updated, True

    # ---- verbs ------------------------------------------------------------------------

    async def act(self, actor: str | None, verb: str, target: str) -> LifecycleResult:
        self.check_manage(actor, verb, target)
        if verb == "kill":
            await self.agent_state.set_desired_running(target, False)
            stopped = await self.hostlink.deactivate(target, graceful=True)
            await self.notices.notify_submitter(target, Killed(agent=target))
            return AgentStopped(agent=target, stopped=stopped)
        if verb == "start":
            await self.agent_state.set_desired_running(target, True)
            if not self.hostlink.running(target) and self.hostlink.connected_hosts():
                await self.placement.try_activate(target)
            return AgentRunning(agent=target, running=self.hostlink.running(target))
        if verb in ("restart", "update"):
            await self.agent_state.set_desired_running(target, True)
            await self.rebuild(target)
            if verb == "update":
                await self.notices.notify_submitter(target, Rebuilt(agent=target))
            return AgentRunning(agent=target, running=self.hostlink.running(target))
        if verb == "destroy":
            return await self.destroy(target)
        raise Conflict(f"unknown lifecycle verb {verb!r}")

    async def destroy(self, name: str) -> AgentDestroyed:
        kids = topology.children(self.topology_store.read_cached(), name)
        if kids:
            raise Conflict(
                f"{name} still has children ({', '.join(kids)}); destroy or reparent them first"
            )
        submitter = self.notices.submitter_of(name)
        applied = self.registry.applied(name)
        await self.hostlink.deactivate(name, graceful=False)
        self.sockets.close(name)
        await self.registry.remove(name, f"destroy {name}")
        await self.reconcile(f"destroy {name}")
        await self.mirror.sync()
        # On its host's disk (and user database): or, that host away, durably later.
        trash, waits_for = await self.disks.trash(name)
        await self.agent_state.forget(name)
        await self.placement.forget(name)
        self.tree_changed()  # its mirrors on its ancestors' hosts go
        self.hostlink.forget_turn(name)
        if applied is not None and ToolGroup.FORGE in applied.tool_groups:
            await self._revoke_forge(name, "was destroyed")
        if applied is not None and applied.matrix.enabled:
            problem = await deactivate_agent(self.matrix, name, enabled=True)
            if problem is not None:
                log.error("destroying %s: its Matrix account: %s", name, problem)
        if submitter is not None:
            await self.notices.notify_agent(submitter, Destroyed(agent=name))
        self.bus.emit("topology", child=name, parent=None, destroyed=True)
        await self.agent_state.activity.record(
            "destroy",
            name,
            f"{name} destroyed",
            others=[submitter] if submitter else [],
            detail={"data_moved_to": trash, "trash_waits_for": waits_for},
        )
        return AgentDestroyed(
            agent=name, destroyed=True, data_moved_to=trash, trash_waits_for=waits_for
        )

    # ---- crash watch --------------------------------------------------------------------

    async def crashed(self, agent: str, reason: str) -> None:
        """Restart with backoff; tell the submitting agent (the root manager just restarts)."""
        now = time.time()
        self.placement.note_crash(agent, reason)
        history = self._crashes.setdefault(agent, deque(maxlen=len(CRASH_BACKOFF)))
        while history and now - history[0] > CRASH_WINDOW:
            history.popleft()
        history.append(now)
        delay = CRASH_BACKOFF[len(history) - 1]
        log.error("agent %s crashed (%s); restarting in %.0fs", agent, reason, delay)
        # Scheduled before the notice: a store that is away fails the notice, not the restart.
        self.background.start_soon(self._restart_later, agent, delay)
        self.bus.emit("agent", agent=agent, running=False, crashed=True, reason=reason)
        await self.agent_state.activity.record(
            "crash",
            agent,
            f"{agent} crashed: {reason}; restarting in {delay:.0f}s",
            detail={"reason": reason, "restart_in": delay},
        )
        await self.notices.notify_submitter(agent, ContainerCrash(agent=agent, reason=reason))

    async def _restart_later(self, agent: str, delay: float) -> None:
        """Restart after ``delay``; while the store is away, wait and retry (never crash
        the coordinator: this runs in its task group)."""
        await anyio.sleep(delay)
        async for attempt in stamina.retry_context(
            on=Unavailable, attempts=None, timeout=None, wait_initial=0.5, wait_max=10.0
        ):
            with attempt:
                try:
                    if (
                        self.registry.exists(agent)
                        and await self.agent_state.desired_running(agent)
                        and not self.hostlink.running(agent)
                        and self.hostlink.connected_hosts()
                    ):
                        await self.placement.try_activate(agent)
                except Unavailable as exc:
                    log.warning("agent %s: cannot restart it yet: %s", agent, exc.message)
                    raise
                except HiveError as exc:
                    # Not the store: e.g. its host went away; it restarts when a host registers.
                    log.error("agent %s: restart after its crash failed: %s", agent, exc.message)
