"""An agent active on its host: its spec and its services, built whole in one place.

Two layers, so that nothing is built half-way and no service is handed the
object that holds it:

- :class:`AgentSite` is what every per-agent service is built on: the agent's
  current :class:`~hyperhive.agent.spec.AgentSpec`, its lifetime, its
  enclosure (directories, user, sandbox), its events bus, its connection to
  the coordinator, the cache of its own meta, and the host's claude slots and
  URL. Subagents, bash tasks, todos and identities take the site (or a part of
  it), never the agent.
- :class:`ActiveAgent` is the site plus the services built on it: its turns,
  bash tasks, subagents, forge identity and Matrix account. The MCP surfaces,
  the harness and the host's reads are handed this.

Both are built by :func:`hyperhive.agent.activation.activated`, and nowhere
else; the host publishes the agent (its surfaces and API find it) only once
it is whole. A change to the agent's place or incarnation is a new spec given
to :meth:`ActiveAgent.respec`; every service reads the spec per use. State
that changes while it runs is its owning service's, behind that service's
methods: the claude pid and the login hold in :class:`~.turns.Turns`, the
isolation and its notes in :class:`~.enclosure.Enclosure`, the connection in
:class:`~.connection.AgentConnection`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from hyperhive.agent.admission import Admission
from hyperhive.agent.connection import CALL_TIMEOUT, AgentConnection
from hyperhive.agent.enclosure import Enclosure
from hyperhive.agent.events import EventsBus
from hyperhive.agent.lifetime import Lifetime
from hyperhive.agent.metacache import MetaCache
from hyperhive.agent.sandbox import AgentSandbox
from hyperhive.agent.spec import AgentSpec
from hyperhive.agent.turns import Turns
from hyperhive.bash.tasks import TaskManager
from hyperhive.config import AgentConfig, HiveConfig, HivePaths
from hyperhive.forge.agent import AgentForge
from hyperhive.matrix.agent import AgentMatrix
from hyperhive.permissions import Capability, ToolGroup
from hyperhive.protocol import Req
from hyperhive.protocol.hostreads import AgentSnapshot
from hyperhive.subagent.session import SubagentManager

__all__ = ["ActiveAgent", "AgentSite", "Identities"]

R = TypeVar("R")


class AgentSite:
    """The agent's current spec and what lives as long as its activation (see module)."""

    __slots__ = (
        "_spec",
        "admission",
        "base_url",
        "bus",
        "connection",
        "enclosure",
        "lifetime",
        "meta",
        "token",
    )

    def __init__(
        self,
        spec: AgentSpec,
        lifetime: Lifetime,
        enclosure: Enclosure,
        bus: EventsBus,
        admission: Admission,
        base_url: str,
    ) -> None:
        self._spec = spec
        self.lifetime = lifetime
        self.enclosure = enclosure
        self.bus = bus
        # The host's claude slots, shared by all its agents (unlimited when run alone).
        self.admission = admission
        self.base_url = base_url
        self.connection = AgentConnection(spec.socket)
        # The bearer token of its MCP surfaces and per-agent API, for this activation.
        self.token = secrets.token_urlsafe(32)
        # Its own get_agent_meta, until the coordinator pushes a change (see metacache).
        self.meta = MetaCache()

    @property
    def spec(self) -> AgentSpec:
        return self._spec

    def respec(self, spec: AgentSpec) -> None:
        """Where :meth:`ActiveAgent.respec` lands: the next spawn, task, subagent or
        tool call sees ``spec``; the meta kept for the old one is dropped."""
        if spec.name != self._spec.name:
            raise ValueError(f"{self._spec.name}'s site cannot take {spec.name}'s spec")
        self._spec = spec
        self.meta.forget()

    # The spec's values, as the subagents' SubagentHost protocol reads them.
    @property
    def name(self) -> str:
        return self._spec.name

    @property
    def config(self) -> AgentConfig:
        return self._spec.config

    @property
    def paths(self) -> HivePaths:
        return self._spec.paths

    @property
    def hive(self) -> HiveConfig:
        return self._spec.hive

    @property
    def groups(self) -> tuple[ToolGroup, ...]:
        return self._spec.groups

    @property
    def state_dir(self) -> Path:
        return self._spec.state_dir

    @property
    def runtime_dir(self) -> Path:
        return self._spec.runtime_dir

    def hive_env(self) -> dict[str, str]:
        return self._spec.hive_env()

    async def call(self, request: Req[R], within: float = CALL_TIMEOUT) -> R:
        """``request`` to the coordinator on the agent's own socket (see connection)."""
        return await self.connection.call(request, within)

    def sandbox(self, *, agent_socket: bool = True) -> AgentSandbox:
        """The sandbox of the agent's next process, from its current spec."""
        return self.enclosure.sandbox(self._spec, agent_socket=agent_socket)

    def give(self, path: Path) -> None:
        self.enclosure.give(path)

    async def reach_config_repos(self) -> None:
        """The sandbox's writable config repos as the current spec's descendants call
        for (a reparent, a repo made or removed on this host), from the next spawn."""
        await self.enclosure.reach(self._spec)


@dataclass(frozen=True, slots=True)
class Identities:
    """The agent's forge identity and Matrix account on this host, or why it has none.

    ``None`` with no problem: it is not given one (no ``forge`` group, ``[matrix]``
    not enabled); ``None`` with a problem: it should have one, and the problem
    says what the operator must add."""

    forge: AgentForge | None = None
    forge_problem: str | None = None
    matrix: AgentMatrix | None = None
    matrix_problem: str | None = None


class ActiveAgent:
    """An agent active on this host, whole: its site and the services built on it."""

    __slots__ = ("bash_tasks", "identities", "site", "subagents", "turns")

    def __init__(
        self,
        site: AgentSite,
        turns: Turns,
        bash_tasks: TaskManager,
        subagents: SubagentManager,
        identities: Identities,
    ) -> None:
        self.site = site
        self.turns = turns
        self.bash_tasks = bash_tasks
        self.subagents = subagents
        self.identities = identities

    def respec(self, spec: AgentSpec) -> None:
        """The one way an active agent's spec changes (its place, its incarnation): every
        service reads the spec per use, so the next turn, task or subagent sees it. The
        sandbox's config repos follow once :meth:`reach_config_repos` has run."""
        self.site.respec(spec)

    # ---- what everything reads ----------------------------------------------------------

    @property
    def spec(self) -> AgentSpec:
        return self.site.spec

    @property
    def name(self) -> str:
        return self.site.spec.name

    @property
    def config(self) -> AgentConfig:
        return self.site.spec.config

    @property
    def groups(self) -> tuple[ToolGroup, ...]:
        return self.site.spec.groups

    @property
    def capabilities(self) -> tuple[Capability, ...]:
        return self.site.spec.capabilities

    @property
    def state_dir(self) -> Path:
        return self.site.spec.state_dir

    @property
    def token(self) -> str:
        return self.site.token

    @property
    def bus(self) -> EventsBus:
        return self.site.bus

    @property
    def lifetime(self) -> Lifetime:
        return self.site.lifetime

    @property
    def connection(self) -> AgentConnection:
        return self.site.connection

    @property
    def enclosure(self) -> Enclosure:
        return self.site.enclosure

    @property
    def meta(self) -> MetaCache:
        return self.site.meta

    @property
    def forge(self) -> AgentForge | None:
        return self.identities.forge

    @property
    def forge_problem(self) -> str | None:
        return self.identities.forge_problem

    @property
    def matrix(self) -> AgentMatrix | None:
        return self.identities.matrix

    @property
    def matrix_problem(self) -> str | None:
        return self.identities.matrix_problem

    # ---- what everything does --------------------------------------------------------------

    async def call(self, request: Req[R], within: float = CALL_TIMEOUT) -> R:
        return await self.site.call(request, within)

    def sandbox(self, *, agent_socket: bool = True) -> AgentSandbox:
        return self.site.sandbox(agent_socket=agent_socket)

    async def reach_config_repos(self) -> None:
        await self.site.reach_config_repos()

    def snapshot(self) -> AgentSnapshot:
        """Its turn state as the per-agent API and the coordinator show it."""
        matrix = self.matrix.view() if self.matrix is not None else None
        return AgentSnapshot(agent=self.name, **self.bus.snapshot(), matrix=matrix)
