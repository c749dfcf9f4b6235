"""The one place an active agent is built: :func:`activated`, and the host's handle on
each activation, :class:`Activation`.

:func:`activated` builds an :class:`~hyperhive.agent.active.ActiveAgent` whole,
in this order, then serves it for the block:

1. its enclosure (directories, user, isolation, skills; on a worker thread), so
   no process of the agent can start without its sandbox;
2. its site (spec, bus reporting its turn state with the spec's incarnation,
   connection, meta cache), and its forge identity and Matrix account;
3. its bash tasks and subagents (entering them marks what a previous host
   left running ``interrupted``);
4. the agent, published on its :class:`Activation` (the host's surfaces and
   API find it from now on), then the todos the recovery owes, the forge
   notification poller and the Matrix ``/sync`` watcher.

Leaving the block unpublishes it, stops the poller and watcher and kills the
process groups of its tasks and subagents. The identities are the
coordinator's to issue (:mod:`.identities`); the poller and the watcher stay
here, on the agent's host, because they use only the agent's own token.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
from anyio.abc import TaskGroup

from hyperhive.agent.active import ActiveAgent, AgentSite, Identities
from hyperhive.agent.activity import CoordinatorActivity
from hyperhive.agent.admission import Admission
from hyperhive.agent.enclosure import Enclosure
from hyperhive.agent.events import EventsBus, TurnStateName
from hyperhive.agent.identities import CoordinatorForge, CoordinatorMatrix
from hyperhive.agent.lifetime import Lifetime
from hyperhive.agent.spec import AgentSpec
from hyperhive.agent.spend import CoordinatorSpend
from hyperhive.agent.todos import CoordinatorTodos
from hyperhive.agent.turns import Turns
from hyperhive.bash.tasks import TaskManager
from hyperhive.errors import HiveError
from hyperhive.forge.agent import AgentForge
from hyperhive.forge.notify import NotificationPoller
from hyperhive.matrix.agent import AgentMatrix
from hyperhive.matrix.watcher import MatrixWatcher
from hyperhive.permissions import BASH_SERVER, ToolGroup
from hyperhive.protocol import WakeReq
from hyperhive.protocol.hostreads import AgentSnapshot
from hyperhive.subagent.session import SubagentManager

__all__ = ["SUBAGENT_SUBSYSTEM", "Activation", "HostParts", "StateReport", "activated"]

SUBAGENT_SUBSYSTEM = "subagent"
FORGE_SENDER = "forge"
MATRIX_SENDER = "matrix"

log = logging.getLogger(__name__)

StateReport = Callable[[AgentSpec, TurnStateName, float], None]
"""``(the agent's spec then, its new turn state, since)``: told to the coordinator."""


@dataclass(frozen=True)
class HostParts:
    """What the host gives every agent it activates."""

    admission: Admission  # its claude slots, shared by all its agents
    base_url: str  # its HTTP server: the agents' MCP surfaces
    report_state: StateReport


class Activation:
    """One activation of an agent on this host, from the coordinator's ``activate`` until
    it ends: the spec it is built from, its lifetime, its events bus (its turn state, to
    be read from the start), and its agent once whole."""

    __slots__ = ("_agent", "_reach_when_built", "_spec", "bus", "lifetime", "scope")

    def __init__(self, spec: AgentSpec) -> None:
        self._spec = spec
        self.lifetime = Lifetime()
        self.bus = EventsBus()
        self.scope = anyio.CancelScope()  # the activation's task: cancelled by a kill
        self._agent: ActiveAgent | None = None
        self._reach_when_built = False

    @property
    def name(self) -> str:
        return self._spec.name

    @property
    def spec(self) -> AgentSpec:
        return self._agent.spec if self._agent is not None else self._spec

    @property
    def agent(self) -> ActiveAgent | None:
        """The active agent, once whole (``None`` while it is prepared, and once it ended)."""
        return self._agent

    def snapshot(self) -> AgentSnapshot:
        """Its turn state as the per-agent API and the coordinator show it (idle while it
        is prepared: nothing of it runs yet)."""
        if self._agent is not None:
            return self._agent.snapshot()
        return AgentSnapshot(agent=self._spec.name, **self.bus.snapshot())

    def respec(self, spec: AgentSpec) -> None:
        """A new spec: the agent's (:meth:`ActiveAgent.respec`), or the one it is built from."""
        if self._agent is not None:
            self._agent.respec(spec)
        else:
            self._spec = spec

    def reach_soon(self, tg: TaskGroup) -> None:
        """Re-bind the config repos the sandbox may write (in a task: callers never wait);
        an agent not whole yet does it once it is."""
        if self._agent is not None:
            tg.start_soon(self._agent.reach_config_repos)
        else:
            self._reach_when_built = True

    async def stop(self, graceful: bool, grace: float) -> None:
        """Graceful: fence the inbox, let the turn finish (within ``grace``); then (or at
        once) cancel."""
        self.lifetime.stop()
        agent = self._agent
        if graceful and agent is not None and agent.connection.up:
            graceful = await agent.connection.fence()
        if graceful:
            with anyio.move_on_after(grace):
                await self.lifetime.done.wait()
        self.lifetime.kill()
        self.scope.cancel()


@asynccontextmanager
async def activated(activation: Activation, host: HostParts) -> AsyncIterator[ActiveAgent]:
    """Build ``activation``'s agent whole, publish it for the block (see module)."""
    # First, so the state dir is made private before anything fills it; off the event
    # loop: useradd, chown and setfacl must not stall the host's other agents.
    prepared_for = activation.spec
    enclosure = await anyio.to_thread.run_sync(Enclosure.prepare, prepared_for)
    bus = activation.bus
    site = AgentSite(
        activation.spec, activation.lifetime, enclosure, bus, host.admission, host.base_url
    )
    # The spec read at each report: a re-sent activation gives it a new incarnation.
    bus.on_state(lambda state, since: host.report_state(site.spec, state, since))
    if activation._reach_when_built or not site.spec.same_place(prepared_for):
        await site.reach_config_repos()  # its place changed while it was prepared
    identities = _identities(site)
    connection = site.connection
    async with (
        TaskManager(
            site.sandbox,
            site.state_dir,
            CoordinatorTodos(connection, BASH_SERVER),
            activity=CoordinatorActivity(connection, "bash"),
        ) as tasks,
        SubagentManager(
            site,
            CoordinatorTodos(connection, SUBAGENT_SUBSYSTEM),
            CoordinatorSpend(connection),
            activity=CoordinatorActivity(connection, "subagent"),
            trace_context=lambda: bus.trace_context,
        ) as subagents,
    ):
        agent = ActiveAgent(site, Turns(), tasks, subagents, identities)
        activation._agent = agent
        try:
            # Only now: a recovered todo wakes a turn whose status call must find them.
            await tasks.report_recovered()
            await subagents.report_recovered()
            async with anyio.create_task_group() as tg:
                if identities.forge is not None:
                    tg.start_soon(_forge, agent, identities.forge)
                if identities.matrix is not None:
                    tg.start_soon(_matrix, agent, identities.matrix)
                yield agent
                tg.cancel_scope.cancel()
        finally:
            # Its last spec stays the activation's: a crash is reported at its incarnation.
            activation._spec, activation._agent = agent.spec, None
            if identities.matrix is not None:
                with anyio.CancelScope(shield=True):
                    await identities.matrix.aclose()


def _identities(site: AgentSite) -> Identities:
    """Its forge identity (the ``forge`` group) and Matrix account (``[matrix]``), each
    issued by the coordinator on its socket, or what the operator must add for one."""
    spec, owner = site.spec, site.enclosure.owner  # its token files become its user's
    forge: AgentForge | None = None
    forge_problem = matrix_problem = None
    if ToolGroup.FORGE in spec.groups:
        if spec.hive.forge is not None:
            issuer = CoordinatorForge(site, spec.hive.forge)
            forge = AgentForge(issuer, spec.name, spec.state_dir, owner=owner)
        else:
            forge_problem = (
                f"{spec.name} has the forge group, but this agent host's hive.toml has no "
                "[forge] url; the operator adds it (docs/forge.md)"
            )
    matrix: AgentMatrix | None = None
    if spec.config.matrix.enabled:
        if spec.hive.matrix is not None:
            issuer_m = CoordinatorMatrix(site, spec.hive.matrix)
            matrix = AgentMatrix(
                issuer_m, spec.name, spec.state_dir, spec.config.matrix, owner=owner
            )
        else:
            matrix_problem = (
                f"{spec.name}'s agent.toml enables [matrix], but hive.toml has no [matrix] "
                "homeserver; the operator adds one (docs/matrix.md)"
            )
    return Identities(forge, forge_problem, matrix, matrix_problem)


async def _forge(agent: ActiveAgent, forge: AgentForge) -> None:
    """Provision the agent's forge identity, then wake it for each forge notification."""
    hive_forge = agent.spec.hive.forge
    assert hive_forge is not None
    try:
        await forge.token()
    except HiveError as exc:  # the poller retries with backoff; create_repo retries too
        log.warning("%s: forge identity not provisioned yet: %s", agent.name, exc.message)

    async def deliver(body: str, key: str) -> None:
        await agent.call(WakeReq(cmd="wake", sender=FORGE_SENDER, body=body, key=key))

    poller = NotificationPoller(
        forge, deliver, interval=hive_forge.poll_seconds, backoff_max=hive_forge.poll_backoff_max
    )
    await poller.run()


async def _matrix(agent: ActiveAgent, matrix: AgentMatrix) -> None:
    """Watch the agent's Matrix account (provisioned on the first sync) and wake it."""
    hive_matrix = agent.spec.hive.matrix
    assert hive_matrix is not None

    async def deliver(body: str, key: str) -> None:
        await agent.call(WakeReq(cmd="wake", sender=MATRIX_SENDER, body=body, key=key))

    watcher = MatrixWatcher(
        matrix,
        deliver,
        timeout=hive_matrix.sync_timeout_seconds,
        backoff_max=hive_matrix.backoff_max,
    )
    await watcher.run()
