"""What the coordinator knows of its agent hosts: each host on the link, each agent's
turn, and the book of who holds which agent at which incarnation (``LinkBook``; the
link's I/O is ``HostLink``, its requests' handlers ``link_table``)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import anyio
from pydantic import BaseModel

from hyperhive.core.infra.hostcalls import HostCalls
from hyperhive.core.infra.notify import EventBus
from hyperhive.core.infra.snapshots import SnapshotIntake
from hyperhive.core.infra.sockets import Dispatch
from hyperhive.errors import Unavailable
from hyperhive.netlink import lease
from hyperhive.protocol import (
    HostCapacity,
    LinkMoveDroppedReq,
    LinkMoveGetReq,
    LinkMovePackedReq,
    LinkMovePutReq,
    LinkMoveUnpackedReq,
    MoveChunk,
    Versions,
    encode,
)
from hyperhive.store.base import HostRepo
from hyperhive.streams import ByteStream

__all__ = ["HostEvents", "LinkBook", "LinkedHost", "MoveReports", "TurnState", "VersionReports"]


@dataclass
class TurnState:
    state: str = "stopped"
    since: float = field(default_factory=time.time)
    needs_login: bool = False
    launch_problem: str | None = None


class HostEvents(Protocol):
    """What the services above the link do when its hosts come and go
    (``core.ops.host_events.HostEventHandlers``): the link calls these, and knows
    nothing of placement, moves or lifecycles."""

    async def host_registered(self, host_id: str) -> None:
        """``host_id`` registered and was told what it may no longer run."""
        ...

    async def agent_crashed(self, agent: str, reason: str) -> None:
        """``agent``'s host reported it crashed (it no longer runs there)."""
        ...

    async def host_lost(self, host_id: str, agents: list[str], lease_expired: bool) -> None:
        """``host_id`` went (or its lease expired) while it ran ``agents``."""
        ...


class MoveReports(Protocol):
    """Where a host's reports of an ``agents move`` go (``core.moves.Mover``): each from
    the host that sent it (the connection's, never the body's)."""

    async def put(self, host: str, req: LinkMovePutReq) -> None: ...

    async def packed(self, host: str, req: LinkMovePackedReq) -> None: ...

    async def get(self, host: str, req: LinkMoveGetReq) -> MoveChunk: ...

    async def unpacked(self, host: str, req: LinkMoveUnpackedReq) -> None: ...

    async def dropped(self, host: str, req: LinkMoveDroppedReq) -> None: ...


class VersionReports(Protocol):
    """Where a host's reports of its agents' versions go (``core.versions.AgentVersions``),
    for agents the reporting host holds."""

    async def started(self, agent: str, versions: Versions) -> None: ...

    async def outdated(
        self, host: str, versions: Versions, agents: Mapping[str, Versions]
    ) -> None: ...


@dataclass
class LinkedHost:
    host_id: str
    stream: ByteStream | None  # None: known from the store only (a previous coordinator's)
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    agents: set[str] = field(default_factory=set)
    leaving: bool = False
    claude_slots: int | None = None
    max_agents: int | None = None  # the most agents placement gives it (None: no cap)
    gone: anyio.Event = field(default_factory=anyio.Event)
    remote: bool = False  # dialled the network link: it holds a lease
    epoch: int = 0
    registered_at: float = field(default_factory=time.time)
    heartbeat_at: float | None = None
    lease_expires: float | None = None  # None: no lease (a local host)
    capacity: HostCapacity | None = None
    cut: bool = False  # its link was ended on purpose (revoked): no grace
    # Ends its connection (reader and forwards in flight) when it is fenced.
    end: anyio.CancelScope | None = None
    reported: set[str] = field(default_factory=set)  # what it ran when it registered

    @property
    def last_heard(self) -> float:
        return self.heartbeat_at or self.registered_at

    async def push(self, data: bytes) -> None:
        if self.stream is None:
            raise anyio.ClosedResourceError
        async with self.lock:
            await self.stream.send(data)


class LinkBook:
    """Registered hosts and agent placement: the link's state and its lookups."""

    def __init__(
        self,
        bus: EventBus,
        max_frame: int,
        agent_api: Callable[[str], Dispatch] | None = None,
        leases: HostRepo | None = None,
        lease_seconds: float = 15.0,
    ) -> None:
        """``leases``: where remote hosts' epochs and leases are kept (durable across a
        coordinator failover). What its hosts' comings and goings set off is handed over
        once built (:meth:`serve_events`)."""
        self.bus = bus
        self.max_frame = max_frame
        self.leases = leases
        self.lease_seconds = lease_seconds
        self.hosts: dict[str, LinkedHost] = {}
        # Remote hosts whose connection dropped inside their lease: still holding agents.
        self.absent: dict[str, LinkedHost] = {}
        # Agents whose host's lease expired while it held them: agent -> that host.
        self.lost: dict[str, str] = {}
        self._local_epochs: dict[str, int] = {}
        self.placement: dict[str, str] = {}
        # The incarnation each placed agent was activated with: forwards must match it.
        self.incarnations: dict[str, int] = {}
        # Agents told to stop whose host may still forward for them (the fence, the last
        # turn's turn_end) until they run again or the host goes: a kubelet, likewise,
        # still reports on the pods it is terminating.
        self.draining: dict[str, tuple[str, int]] = {}
        self.agent_api = agent_api
        self._apis: dict[str, Dispatch] = {}
        self.turns: dict[str, TurnState] = {}
        # Told when a host registers or is lost and an agent crashes (:meth:`serve_events`).
        self._events: HostEvents | None = None
        # ``agents move``'s reports from hosts (:meth:`serve_moves`).
        self.moves: MoveReports | None = None
        # Agents' versions, from their hosts (:meth:`serve_versions`).
        self.versions: VersionReports | None = None
        # Hosts' agent snapshots (:meth:`serve_snapshots`).
        self.snapshots: SnapshotIntake | None = None
        # The host each agent last ran on: its log stays on that host's disk after it stops.
        self.last_host: dict[str, str] = {}
        # Reads of a host's disk and memory (logs, turn state and stream): #14, no shared disk.
        self.calls = HostCalls(self._push_to)
        # Handed to each host at registration: it names agents' users after it.
        self.hive_id: str | None = None

    def serve_events(self, events: HostEvents) -> None:
        """Tell ``events`` of hosts registering or lost and agents crashing."""
        self._events = events

    @property
    def events(self) -> HostEvents:
        if self._events is None:
            raise Unavailable("this coordinator's host link has no one to tell of host events")
        return self._events

    def serve_versions(self, reports: VersionReports) -> None:
        """Hand hosts' reports of their agents' versions to ``reports``."""
        self.versions = reports

    def serve_snapshots(self, intake: SnapshotIntake) -> None:
        """Hand hosts' snapshot uploads and reads to ``intake``."""
        self.snapshots = intake

    def serve_moves(self, reports: MoveReports) -> None:
        """Hand hosts' ``agents move`` reports to ``reports`` (the mover, once built)."""
        self.moves = reports

    async def _push_to(self, host_id: str, cmd: BaseModel) -> None:
        host = self.hosts.get(host_id)
        if host is None:
            raise Unavailable(f"agent host {host_id} is not connected")
        try:
            await host.push(encode(cmd))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise Unavailable(f"agent host {host_id} went away") from exc

    def running(self, agent: str) -> bool:
        return agent in self.placement

    def host_of(self, agent: str) -> str | None:
        return self.placement.get(agent)

    def last_host_of(self, agent: str) -> str | None:
        """The host ``agent`` last ran on (its log stays on that host's disk after it stops)."""
        return self.last_host.get(agent)

    def connected(self, host_id: str) -> bool:
        """Whether ``host_id``'s link is up now (not away inside its lease)."""
        return host_id in self.hosts

    def connected_hosts(self) -> list[str]:
        """The hosts whose link is up now, by name."""
        return sorted(self.hosts)

    def connected_locally(self, host_id: str) -> bool:
        """Whether ``host_id`` is connected over the local socket (it shares the home)."""
        host = self.hosts.get(host_id)
        return host is not None and not host.remote

    def local_hosts(self) -> list[str]:
        """The connected hosts on the coordinator's machine (no lease), by name."""
        return sorted(h for h, linked in self.hosts.items() if not linked.remote)

    def running_turns(self) -> dict[str, TurnState]:
        """The turn state of every agent running now, by agent (in placement order)."""
        return {
            a: dataclasses.replace(t)
            for a in self.placement
            if (t := self.turns.get(a)) is not None
        }

    def reported_running(self, host_id: str, agent: str) -> bool:
        """Whether connected ``host_id`` said at registration that it runs ``agent``."""
        host = self.hosts.get(host_id)
        return host is not None and agent in host.reported

    def turn_of(self, agent: str) -> TurnState | None:
        """``agent``'s turn as its host last reported it (``None``: never placed here)."""
        turn = self.turns.get(agent)
        return None if turn is None else dataclasses.replace(turn)

    def forget_turn(self, agent: str) -> None:
        """Drop ``agent``'s turn state (it was destroyed: no view shows it stopped)."""
        self.turns.pop(agent, None)

    def lost_on(self, agent: str) -> str | None:
        """The host whose lease expired while it held ``agent`` (``None``: not lost)."""
        return self.lost.get(agent)

    def lost_agents(self) -> dict[str, str]:
        """Every lost agent and the host it was lost on, by agent."""
        return dict(sorted(self.lost.items()))

    def capacity_report(self, host_id: str) -> dict[str, int | None]:
        """What a connected host said of its capacity, newest first (its heartbeat's
        figures over its registration's); placement reads it via ``placing.capacity_of``."""
        host = self.hosts.get(host_id)
        if host is None:
            return {}
        beat = host.capacity
        return {
            "claude_slots": (beat.claude_slots if beat else None) or host.claude_slots,
            "max_agents": host.max_agents,
            "memory_free": beat.mem_available if beat else None,
        }

    def gone(self, host_id: str) -> anyio.Event | None:
        """Set when ``host_id``'s current link ends (``None``: not connected)."""
        host = self.hosts.get(host_id)
        return host.gone if host is not None else None

    def claude_slots(self) -> dict[str, int | None]:
        """Each connected host's claude slots (None: an older host that did not say)."""
        return {h: host.claude_slots for h, host in sorted(self.hosts.items())}

    def waiting_for_slots(self) -> list[tuple[str, float]]:
        """Running agents queued for a claude slot on their host, longest waiting first."""
        return sorted(
            ((a, t.since) for a, t in self.turns.items() if t.state == "waiting_slot"),
            key=lambda pair: pair[1],
        )

    def heartbeat_seconds(self) -> float:
        return lease.heartbeat_seconds(self.lease_seconds)

    def all_hosts(self) -> dict[str, LinkedHost]:
        """Connected hosts and remote ones away inside their lease."""
        return {**self.absent, **self.hosts}

    def name_taken(self, host_id: str, now: float | None = None) -> bool:
        """Whether a new registration as ``host_id`` must be refused: one is connected and
        not silent (a silent one is the same host's dead link, which the new one replaces)."""
        host = self.hosts.get(host_id)
        if host is None:
            return False
        now = time.time() if now is None else now
        return not (host.remote and lease.silent(host.last_heard, self.lease_seconds, now))

    def holder(self, agent: str) -> tuple[str | None, int | None]:
        """The host that may speak for ``agent`` and at which incarnation (a stopping
        agent's host keeps that right until the agent runs again or the host goes)."""
        host = self.placement.get(agent)
        if host is None and agent in self.draining:
            return self.draining[agent]
        return host, self.incarnations.get(agent)

    def cached_apis(self) -> set[str]:
        """The agents whose forwarded-frame API is built now (for views and tests)."""
        return set(self._apis)

    def forget_api(self, agent: str) -> None:
        """Evict ``agent``'s API (it stopped here; a later frame builds it afresh)."""
        self._apis.pop(agent, None)

    def api_of(self, agent: str) -> Dispatch:
        if self.agent_api is None:
            raise Unavailable("this coordinator does not serve forwarded agent frames")
        api = self._apis.get(agent)
        if api is None:
            api = self._apis[agent] = self.agent_api(agent)
        return api

    def restore(self, restored: lease.Restored) -> None:
        """Take over a previous coordinator's hosts (a restart, a failover), before any
        host dials in: each still holds its agents until the lease read from the store
        expires (then they are ``lost``, as if this coordinator had seen the host go), and
        agents lost before are shown lost without telling anyone again."""
        for name, held in restored.away.items():
            if name in self.hosts or name in self.absent:
                continue
            self.absent[name] = LinkedHost(
                name,
                None,
                remote=True,
                epoch=held.epoch,
                lease_expires=held.expires_at,
                agents=set(restored.holds.get(name, [])),
            )
        for agent, host in restored.lost.items():
            self.lost.setdefault(agent, host)

    async def next_epoch(self, host_id: str, remote: bool, expires_at: float) -> int:
        if remote and self.leases is not None:
            return await self.leases.new_epoch(host_id, expires_at)
        epoch = self._local_epochs[host_id] = self._local_epochs.get(host_id, 0) + 1
        return epoch
