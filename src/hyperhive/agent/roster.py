"""Every agent this host runs, from the coordinator's ``activate`` until it ends.

An activation is kept from the moment it is asked for; its agent is found (by
the surfaces, the API, the reads) only once whole. Each runs supervised in the
host's task group: one agent's crash is reported to the coordinator and never
stops the others. A rebuild starts once the old incarnation's turn has ended;
an ``activate`` of what already runs (the coordinator restarted) only hands it
the new incarnation and its place.
"""

from __future__ import annotations

import logging
from typing import Protocol

import anyio
from anyio.abc import TaskGroup

from hyperhive.agent.activation import Activation, HostParts, activated
from hyperhive.agent.active import ActiveAgent
from hyperhive.agent.events import TurnStateName
from hyperhive.agent.harness import run_harness
from hyperhive.agent.spec import AgentSpec
from hyperhive.agent.versions import HostVersions
from hyperhive.config import HiveConfig, HivePaths
from hyperhive.netlink.forward import ForwardedSockets
from hyperhive.protocol import (
    ActivateCmd,
    LinkAgentCrashedReq,
    LinkAgentStartedReq,
    LinkAgentStateReq,
    Req,
    Versions,
)
from hyperhive.sysusers import ensure_user

__all__ = ["STOP_TIMEOUT", "Reports", "Roster"]

log = logging.getLogger(__name__)

STOP_TIMEOUT = 120.0


class Reports(Protocol):
    """Where the roster's reports to the coordinator go (the host's link)."""

    def tell_soon(self, req: Req[None], about: str) -> None:
        """Send ``req`` without waiting; dropped while unlinked."""
        ...

    async def tell(self, req: Req[None]) -> None:
        """Send ``req`` and wait for it; dropped while unlinked, a failure ignored."""
        ...


class Roster:
    """This host's activations by agent name: started, re-placed, supervised, stopped."""

    def __init__(
        self,
        paths: HivePaths,
        hive: HiveConfig,
        versions: HostVersions,
        forwarded: ForwardedSockets | None,
        reports: Reports,
    ) -> None:
        """``forwarded``: a remote host's agent sockets, served here (a local host's are
        the coordinator's)."""
        self.paths = paths
        self.hive = hive
        self.versions = versions
        self.forwarded = forwarded
        self.reports = reports
        self._activations: dict[str, Activation] = {}
        self._parts: HostParts | None = None
        self._tg: TaskGroup | None = None

    def open(self, parts: HostParts, tg: TaskGroup) -> None:
        """The host serves: its agents start on ``parts``, and run in ``tg``."""
        self._parts, self._tg = parts, tg

    # ---- what runs here ---------------------------------------------------------------

    def agent(self, name: str) -> ActiveAgent | None:
        """``name``'s active agent, if it is active here and whole."""
        activation = self._activations.get(name)
        return activation.agent if activation is not None else None

    def activation(self, name: str) -> Activation | None:
        """``name``'s activation here (whole or still prepared), if it has one."""
        return self._activations.get(name)

    @property
    def agents(self) -> dict[str, ActiveAgent]:
        """The active agents of this host that are whole, by name (a snapshot)."""
        return {n: a.agent for n, a in self._activations.items() if a.agent is not None}

    def active(self) -> tuple[ActiveAgent, ...]:
        return tuple(a.agent for a in self._activations.values() if a.agent is not None)

    def names(self) -> list[str]:
        """Every agent with an activation here, sorted."""
        return sorted(self._activations)

    def outdated(self, now: Versions) -> dict[str, Versions]:
        """The agents running (not stopping) on versions other than ``now``, with theirs."""
        return {
            name: a.versions
            for name, a in self._activations.items()
            if a.versions is not None and a.versions != now and not a.lifetime.stopping.is_set()
        }

    # ---- starting and placing ---------------------------------------------------------

    async def activate(self, cmd: ActivateCmd) -> None:
        spec = AgentSpec.of(cmd, self.paths, self.hive)
        current = self._activations.get(cmd.agent)
        if current is not None and current.lifetime.stopping.is_set():
            # A rebuild: the old incarnation is finishing its turn; start after it.
            with anyio.move_on_after(STOP_TIMEOUT):
                await current.lifetime.done.wait()
            current = self._activations.get(cmd.agent)
        if current is not None:
            if current.spec.config == spec.config:
                # The coordinator re-sent what is already running (it restarted): the new
                # incarnation (and a reparent it made meanwhile) needs no restart.
                await self._serve_socket(cmd)  # takes the new activation's incarnation
                self._respec(current, spec)
                if (agent := current.agent) is not None:
                    self.report_state(spec, agent.bus.turn_state, agent.bus.turn_state_since)
                return
            await self.deactivate(cmd.agent, graceful=True)
        await self._serve_socket(cmd)
        versions = await self.versions.current()
        activation = self._activations[cmd.agent] = Activation(spec, versions, restore=cmd.restore)
        assert self._tg is not None
        self._tg.start_soon(self._supervise, activation)

    async def _serve_socket(self, cmd: ActivateCmd) -> None:
        """A remote host serves the agent's socket itself (a local one's is the coordinator's)."""
        if self.forwarded is None:
            return
        owner = None
        if self.hive.runtime == "bwrap":
            owner = await anyio.to_thread.run_sync(ensure_user, self.paths, cmd.agent)
        assert self._tg is not None
        await self.forwarded.open(
            self._tg, cmd.agent, self.paths.agent_sock(cmd.agent), cmd.incarnation, owner
        )

    def place(self, name: str, parent: str | None, descendants: tuple[str, ...]) -> None:
        """A running agent's new place in the tree: a new spec, no restart."""
        activation = self._activations.get(name)
        if activation is not None:
            self._respec(activation, activation.spec.placed(parent, descendants))

    def _respec(self, activation: Activation, spec: AgentSpec) -> None:
        """Hand ``activation`` a new spec; a new place re-binds its config repos (in a
        task: the command loop never waits on it)."""
        moved = not activation.spec.same_place(spec)
        if moved:
            log.info(
                "%s: parent %s, descendants %s",
                spec.name,
                spec.parent or "(root)",
                list(spec.descendants),
            )
        activation.respec(spec)
        if moved and self._tg is not None:
            activation.reach_soon(self._tg)

    def repos_changed(self, agents: list[str]) -> None:
        """These agents' config repos (or this host's mirrors of them) were just made or
        removed here: the sandboxes of those who may write them follow from their next
        spawn."""
        changed = set(agents)
        for activation in list(self._activations.values()):
            spec = activation.spec
            if (spec.name in changed or changed.intersection(spec.descendants)) and self._tg:
                activation.reach_soon(self._tg)

    # ---- what it tells the coordinator ------------------------------------------------

    def report_state(self, spec: AgentSpec, state: TurnStateName, since: float) -> None:
        """Tell the coordinator an agent's turn state, as of ``spec``'s incarnation."""
        activation = self._activations.get(spec.name)
        report = LinkAgentStateReq(
            cmd="agent_state",
            agent=spec.name,
            turn_state=state,
            since=since,
            launch_problem=activation.bus.launch_problem if activation is not None else None,
            incarnation=spec.incarnation,
        )
        self.reports.tell_soon(report, f"{spec.name}'s state")

    def _report_started(self, activation: Activation) -> None:
        """Tell the coordinator which versions the agent started on (kept as its own)."""
        if activation.versions is None:
            return
        report = LinkAgentStartedReq(
            cmd="agent_started",
            agent=activation.name,
            incarnation=activation.spec.incarnation,
            versions=activation.versions,
        )
        self.reports.tell_soon(report, f"{activation.name}'s start")

    # ---- running and stopping ---------------------------------------------------------

    async def _supervise(self, activation: Activation) -> None:
        name = activation.name
        reason: str | None = None
        with activation.scope:
            try:
                assert self._parts is not None  # activations come after it serves
                async with activated(activation, self._parts) as agent:
                    self._report_started(activation)
                    await run_harness(agent)
            except Exception as exc:  # contained: one agent's crash is not the host's
                log.exception("agent %s crashed", name)
                reason = f"{type(exc).__name__}: {exc}"
        if self._activations.get(name) is activation:
            del self._activations[name]
            if self.forwarded is not None:
                self.forwarded.close(name)
        activation.lifetime.end()
        # One the coordinator stopped (a fence, a rebuild) is no longer its to restart:
        # a report now would land on the agent's next incarnation, maybe already here.
        stopped = activation.lifetime.stopping.is_set()
        if reason is not None and not stopped:
            with anyio.CancelScope(shield=True):
                await self.reports.tell(
                    LinkAgentCrashedReq(
                        cmd="agent_crashed",
                        agent=name,
                        reason=reason,
                        incarnation=activation.spec.incarnation,
                    )
                )

    async def deactivate(
        self, name: str, graceful: bool = True, grace: float = STOP_TIMEOUT
    ) -> None:
        """Graceful: fence the inbox, let the turn finish; then (or at once) cancel."""
        activation = self._activations.get(name)
        if activation is not None:
            await activation.stop(graceful, grace)

    async def stopped(self, name: str) -> None:
        """Stop ``name`` gracefully if it runs here; return once it has stopped."""
        activation = self._activations.get(name)
        if activation is None:
            return
        await activation.stop(graceful=True, grace=STOP_TIMEOUT)
        with anyio.move_on_after(STOP_TIMEOUT):
            await activation.lifetime.done.wait()

    async def stop_all(self, graceful: bool = True, grace: float = STOP_TIMEOUT) -> None:
        """Stop every agent here, each with ``grace`` to end its turn."""
        async with anyio.create_task_group() as tg:
            for name in list(self._activations):
                tg.start_soon(self.deactivate, name, graceful, grace)
