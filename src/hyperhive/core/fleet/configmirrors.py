"""Mirrors of config repos for ancestors on other hosts (#14: no shared disk).

Spec 004 gives every agent write access to its descendants' proposed config
repos, at ``agents/<name>/config`` in its sandbox. Placement keeps a child
with its parent where it can, but a pin (``--host``) or ``agents move`` can
put them on different hosts. Then the ancestor's host keeps a *mirror* of the
child's repo at that same path (``agent/mirrorrepos.py``): the agent's
experience is the same wherever its descendants run. This decides which
mirrors each host keeps (:func:`plan`, pure) and brings them in line: the
mirrors no longer wanted go (a reparent, a move back, a destroy), the kept
ones' writers follow the tree, and each is brought to its real repo's head
when that moved. ``request_apply_commit`` then reads an ancestor's commit
from its own host's mirror (``core/ops/approvals.py``).

A refresh is asked for whenever what it reads may have changed (an agent
activated, the tree or a placement changed, a real repo committed to) and
runs in the background, coalesced: one pass at a time, one more if asked
meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from hyperhive import topology
from hyperhive.core.fleet.agentdisks import DISK_ASK_WITHIN, LOCAL, AgentDisks
from hyperhive.core.fleet.hostlink import HostLink
from hyperhive.core.fleet.placement import MOVING_PHASES
from hyperhive.core.infra.background import Background
from hyperhive.errors import HiveError, Unavailable
from hyperhive.protocol.hostdisk import (
    MirrorsKeepAsk,
    MirrorWriteAsk,
    MirrorWriters,
    RepoFile,
)
from hyperhive.store.base import HostRepo, PlacementRepo
from hyperhive.topology import TopologyStore

__all__ = ["ConfigMirrors", "plan"]

log = logging.getLogger(__name__)


def plan(
    topo: Mapping[str, str | None], disk_of: Mapping[str, str], disk: str
) -> dict[str, list[str]]:
    """The mirrors the disk ``disk`` keeps: each agent whose directories are on another
    disk and which has ancestors on this one, with those ancestors (nearest first)."""
    out: dict[str, list[str]] = {}
    for agent in sorted(topo):
        if disk_of.get(agent, LOCAL) == disk:
            continue
        writers = [a for a in topology.ancestors(topo, agent) if disk_of.get(a, LOCAL) == disk]
        if writers:
            out[agent] = writers
    return out


class ConfigMirrors:
    def __init__(
        self,
        disks: AgentDisks,
        link: HostLink,
        topology_store: TopologyStore,
        assignments: PlacementRepo,
        hosts: HostRepo,
        background: Background,
    ) -> None:
        self.disks = disks
        self.link = link
        self.topology_store = topology_store
        self.assignments = assignments
        self.hosts = hosts
        self.background = background
        self._asked = False
        self._running = False
        # Hosts last told to keep no mirror: not asked again until they have one (or
        # register again: their disk may hold some from before).
        self._bare: set[str] = set()

    # ---- asking for a refresh ---------------------------------------------------------

    def refresh_soon(self) -> None:
        """Bring every connected host's mirrors in line, in the background."""
        self._asked = True
        if self._running:
            return
        try:
            self.background.start_soon(self._refreshing)
        except Unavailable:
            return  # not running: each host's registration refreshes it
        self._running = True

    def host_registered(self, host_id: str) -> None:
        self._bare.discard(host_id)
        self.refresh_soon()

    async def _refreshing(self) -> None:
        try:
            while self._asked:
                self._asked = False
                try:
                    await self.refresh()
                except HiveError as exc:  # the store away, say: the next change retries
                    log.warning("config repo mirrors not refreshed now: %s", exc.message)
        finally:
            self._running = False

    # ---- one pass ---------------------------------------------------------------------

    async def refresh(self) -> None:
        topo = self.topology_store.read_cached()
        rows = await self.assignments.all()
        remote = {row.name for row in await self.hosts.list()}

        def disk(host: str) -> str:
            return host if host in remote else LOCAL

        disk_of = {a.agent: disk(a.host) for a in rows}
        # A moving agent's repo is on neither host for certain: its mirrors wait.
        moving = {a.agent for a in rows if a.move_phase in MOVING_PHASES}
        heads: dict[str, tuple[str, RepoFile] | None] = {}
        done: set[str] = set()
        for host_id in self.link.connected_hosts():
            mine = disk(host_id)
            if mine in done:
                continue  # local hosts share one disk: one of them keeps its mirrors
            done.add(mine)
            wanted = plan(topo, disk_of, mine)
            if not wanted and host_id in self._bare:
                continue
            try:
                await self._sync(host_id, wanted, moving, heads, sorted(topo))
            except HiveError as exc:
                log.warning(
                    "agent host %s: config repo mirrors not brought in line now: %s",
                    host_id,
                    exc.message,
                )

    async def _sync(
        self,
        host: str,
        wanted: dict[str, list[str]],
        moving: set[str],
        heads: dict[str, tuple[str, RepoFile] | None],
        hive: list[str],
    ) -> None:
        keep = [MirrorWriters(agent=a, writers=w) for a, w in wanted.items()]
        kept = await self.link.calls.ask(
            host,
            lambda n: MirrorsKeepAsk(cmd="mirrors_keep", ask=n, mirrors=keep, hive_agents=hive),
            DISK_ASK_WITHIN,
            "keeping its config repo mirrors",
        )
        if wanted:
            self._bare.discard(host)
        else:
            self._bare.add(host)
        for agent, writers in wanted.items():
            if agent in moving:
                continue
            if agent not in heads:
                heads[agent] = await self._head(agent)
            found = heads[agent]
            if found is not None and kept.sources.get(agent) != found[1].commit:
                await self._write(host, agent, writers, *found)

    async def _write(
        self, host: str, agent: str, writers: list[str], source_host: str, head: RepoFile
    ) -> None:
        try:
            await self.link.calls.ask(
                host,
                lambda n: MirrorWriteAsk(
                    cmd="mirror_write",
                    ask=n,
                    agent=agent,
                    writers=writers,
                    text=head.text,
                    source=head.commit,
                    source_host=source_host,
                ),
                DISK_ASK_WITHIN,
                f"a mirror of {agent}'s config repo",
            )
        except HiveError as exc:
            log.warning(
                "agent host %s: mirror of %s's config repo not written: %s",
                host,
                agent,
                exc.message,
            )

    async def _head(self, agent: str) -> tuple[str, RepoFile] | None:
        """The host holding ``agent``'s real repo and the repo at its head, if that host
        is connected now (else its mirrors stay as they are until it is)."""
        assigned = await self.assignments.get(agent)
        host = await self.disks.serving(assigned.host if assigned is not None else LOCAL)
        if host is None:
            return None
        try:
            return host, await self.disks.show_on(host, agent, "HEAD")
        except HiveError as exc:
            log.info("%s's config repo not mirrored now: %s", agent, exc.message)
            return None
