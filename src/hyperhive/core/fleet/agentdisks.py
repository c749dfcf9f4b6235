"""Agents' directories, as the coordinator reaches them: through the host that holds them.

The coordinator has no disk of an agent (#14: no shared disk). An agent's
proposed config repo, state, home and workspace are on its *disk host*: its
durable placement (``core/fleet/placement.py``), even while it is stopped. Seeding
and committing its config, reading a commit, setting who may write the repo,
and trashing it on destroy are asks to that host (``protocol/hostdisk.py``).

A local host (``hivectl up``, over ``run/hosts.sock``) shares the
coordinator's home, and its name is per process: an agent assigned to a
local host that is gone is served by whichever local host is connected. A
remote host is waited for (briefly) and, if still away, the operation is
refused naming it. Trash is the exception: a destroy while the disk host is
away is recorded in the store and carried out when that host registers again.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping

import anyio

from hyperhive import topology
from hyperhive.core.fleet.hostlink import HostLink
from hyperhive.core.fleet.placement import MOVING_PHASES, Placement, PlacementWait
from hyperhive.errors import Conflict, HiveError, InvalidRequest, Unavailable
from hyperhive.protocol.hostdisk import (
    MAX_CONFIG,
    AgentTrashAsk,
    RepoAcl,
    RepoAclAsk,
    RepoFile,
    RepoShowAsk,
    ReposMissingAsk,
    RepoWriteAsk,
    RepoWritten,
    Trashed,
)
from hyperhive.store.base import HostRepo, PlacementRepo, TrashRepo
from hyperhive.topology import TopologyStore

__all__ = ["DISK_ASK_WITHIN", "DISK_WAIT", "LOCAL", "AgentDisks"]

log = logging.getLogger(__name__)

# How long an operation that needs an agent's disk waits for its host to connect.
DISK_WAIT = 5.0
# How long a host may take to answer (git, setfacl, useradd on its side).
DISK_ASK_WITHIN = 60.0
# How long a destroy waits for the host's trash before keeping it for its next registration.
TRASH_WITHIN = 20.0
# The pending trash of an agent never placed: any local host (the coordinator's home).
LOCAL = ""
_POLL = 0.1


class AgentDisks:
    def __init__(
        self,
        link: HostLink,
        placement: Placement,
        topology: TopologyStore,
        assignments: PlacementRepo,
        hosts: HostRepo,
        trash: TrashRepo,
        wait: float = DISK_WAIT,
    ) -> None:
        self.link = link
        self.placement = placement
        self.topology = topology
        # One ACL sync at a time per host, each from the tree as it is when it asks: a
        # sync computed from an older tree (a registration's, say) cannot land after a
        # reparent's and take the new ancestors' access away again.
        self._acl_locks: defaultdict[str, anyio.Lock] = defaultdict(anyio.Lock)
        self.assignments = assignments
        self.hosts = hosts
        self.pending_trash = trash
        self.wait = wait

    # ---- which host -------------------------------------------------------------------

    async def _is_local(self, host: str) -> bool:
        """A host the operator never added: a local one, sharing the coordinator's home."""
        return host == LOCAL or await self.hosts.get(host) is None

    def _local_connected(self) -> str | None:
        local = self.link.local_hosts()
        return local[0] if local else None

    async def _serving(self, host: str) -> str | None:
        """The connected host that reaches ``host``'s disk now, if any."""
        if self.link.connected(host):
            return host
        if await self._is_local(host):
            return self._local_connected()
        return None

    async def disk(self, host: str) -> str:
        """Which disk ``host`` has: its own, or (a local host) the coordinator's home."""
        return LOCAL if await self._is_local(host) else host

    async def disk_of(self, agent: str) -> str:
        """The disk holding ``agent``'s directories (see :meth:`disk`): its placement's."""
        assigned = await self.assignments.get(agent)
        return await self.disk(assigned.host if assigned is not None else LOCAL)

    async def serving(self, host: str) -> str | None:
        """The connected host that reaches ``host``'s disk now, if any."""
        return await self._serving(host)

    async def disk_host(self, agent: str, *, place: bool = True) -> str:
        """The connected host holding ``agent``'s directories, waiting up to ``wait`` for
        it. ``place``: an agent with no placement yet (a new one) is placed now, by the
        rules (beside its parent where possible)."""
        with anyio.move_on_after(self.wait):
            while True:
                try:
                    found = await self._find(agent, place)
                except PlacementWait:
                    found = None
                if found is not None:
                    return found
                await anyio.sleep(_POLL)
        return await self._refuse(agent, place)

    async def _find(self, agent: str, place: bool) -> str | None:
        assigned = await self.assignments.get(agent)
        if assigned is None:
            if not place:
                return self._local_connected()
            return await self.placement.host_for(agent)
        if assigned.move_phase in MOVING_PHASES:
            raise Conflict(
                f"{agent} is moving from {assigned.move_from} to {assigned.move_to}; its "
                "config repo can be reached when the move ends"
            )
        return await self._serving(assigned.host)

    async def _refuse(self, agent: str, place: bool) -> str:
        assigned = await self.assignments.get(agent)
        if assigned is not None and not await self._is_local(assigned.host):
            raise Unavailable(
                f"agent host {assigned.host} holding {agent}'s config repo is not connected; "
                "try again when it is back (`hivectl hosts list` shows it)"
            )
        if assigned is None and place:
            try:
                await self.placement.host_for(agent)
            except PlacementWait as exc:
                raise Unavailable(
                    f"{agent}'s config repo needs an agent host: {exc.message}"
                ) from exc
        raise Unavailable(
            f"no agent host is connected to hold {agent}'s config repo; run `hivectl up` "
            "(or `hivectl host`)"
        )

    # ---- config repos -----------------------------------------------------------------

    async def seed(self, agent: str, text: str, message: str) -> None:
        """A created (or re-inited) agent's directories and repo, on the host it is placed
        on if that is connected now; else they are seeded from its applied config when
        its host registers (a spawn never waits for a host, as its activation does not).
        Never places it: its activation does (one decision, not two racing)."""
        assigned = await self.assignments.get(agent)
        host = await self._serving(assigned.host) if assigned is not None else None
        if host is None:
            log.info("%s's config repo is seeded when its host registers", agent)
            return
        try:
            await self._write_on(host, agent, text, message, missing_only=False)
        except HiveError as exc:
            log.warning(
                "agent host %s did not seed %s's config repo now (%s); it is seeded from "
                "the applied config when the host registers again",
                host,
                agent,
                exc.message,
            )

    async def write(
        self, agent: str, text: str, message: str, *, missing_only: bool = False
    ) -> RepoWritten:
        """Commit ``text`` as ``agent``'s proposed ``agent.toml`` on its host (making its
        directories and repo if missing; placing it if new)."""
        host = await self.disk_host(agent)
        return await self._write_on(host, agent, text, message, missing_only)

    async def _write_on(
        self, host: str, agent: str, text: str, message: str, missing_only: bool
    ) -> RepoWritten:
        return await self.link.calls.ask(
            host,
            lambda n: RepoWriteAsk(
                cmd="repo_write",
                ask=n,
                agent=agent,
                text=text,
                message=message,
                missing_only=missing_only,
            ),
            DISK_ASK_WITHIN,
            f"a commit to {agent}'s config repo",
        )

    async def show(self, agent: str, commit: str) -> RepoFile:
        """``agent.toml`` at ``commit`` (a prefix or HEAD~n) of ``agent``'s proposed repo."""
        return await self.show_on(await self.disk_host(agent, place=False), agent, commit)

    async def show_on(
        self, host: str, agent: str, commit: str, *, mirror: bool = False
    ) -> RepoFile:
        """``agent.toml`` at ``commit`` of ``agent``'s repo on ``host`` (``mirror``: of
        ``host``'s mirror of it), at most ``MAX_CONFIG`` long (the host refuses more)."""
        shown = await self.link.calls.ask(
            host,
            lambda n: RepoShowAsk(
                cmd="repo_show", ask=n, agent=agent, commit=commit, mirror=mirror
            ),
            DISK_ASK_WITHIN,
            f"a read of {agent}'s config repo" + (" mirror" if mirror else ""),
        )
        if len(shown.text.encode()) > MAX_CONFIG:  # a host that did not refuse it
            raise InvalidRequest(
                f"{agent}'s agent.toml at {shown.commit[:12]} on agent host {host} is over "
                f"the {MAX_CONFIG // 1024} KiB limit; make it smaller and commit again"
            )
        return shown

    async def sync_acls(self, agents: list[str]) -> None:
        """Each of ``agents``' repos writable by exactly it and its ancestors (in the tree
        as it is when its host is asked), on each one's host. A host not connected now is
        brought in line when it registers again."""
        by_host: dict[str, list[str]] = defaultdict(list)
        for agent in agents:
            assigned = await self.assignments.get(agent)
            serving = await self._serving(assigned.host if assigned is not None else LOCAL)
            if serving is None:
                log.info("%s's repo ACLs wait for its host to register", agent)
                continue
            by_host[serving].append(agent)
        for host, names in by_host.items():
            try:
                await self._acls_on(host, names)
            except Unavailable as exc:  # went meanwhile: done when it registers again
                log.warning("agent host %s: repo ACLs not set now: %s", host, exc.message)

    async def _acls_on(self, host: str, names: list[str]) -> None:
        async with self._acl_locks[host]:
            topo = self.topology.read_cached()
            repos = [
                RepoAcl(agent=a, writers=[a, *topology.ancestors(topo, a)])
                for a in sorted(names)
                if a in topo
            ]
            if not repos:
                return
            await self.link.calls.ask(
                host,
                lambda n: RepoAclAsk(cmd="repo_acl", ask=n, repos=repos, hive_agents=sorted(topo)),
                DISK_ASK_WITHIN,
                "setting config repos' ACLs",
            )

    # ---- destroy ----------------------------------------------------------------------

    async def trash(self, agent: str) -> tuple[str | None, str | None]:
        # A host that does not answer in time: kept for its next registration (trashing
        # is idempotent there: what is already gone is nothing to move).
        """Move destroyed ``agent``'s directories to its host's trash and remove its user:
        ``(where they went, None)``; or, its host away, record that durably and return
        ``(None, the host it waits for)``."""
        assigned = await self.assignments.get(agent)
        host = assigned.host if assigned is not None else LOCAL
        serving = await self._serving(host)
        if serving is not None:
            try:
                return (await self._trash_on(serving, agent, TRASH_WITHIN)).moved_to, None
            except Unavailable as exc:
                log.warning("agent host %s went before trashing %s: %s", serving, agent, exc)
        await self.pending_trash.add(agent, host)
        log.warning(
            "%s destroyed while agent host %s holding its directories is away: they move "
            "to its trash when it registers again",
            agent,
            host or "(local)",
        )
        return None, host or "a local agent host"

    async def _trash_on(self, host: str, agent: str, within: float = DISK_ASK_WITHIN) -> Trashed:
        return await self.link.calls.ask(
            host,
            lambda n: AgentTrashAsk(cmd="agent_trash", ask=n, agent=agent),
            within,
            f"trashing {agent}'s directories",
        )

    async def check_no_pending_trash(self, agent: str) -> None:
        """Refuse a new agent under a name whose old directories still wait for trash."""
        pending = await self.pending_trash.get(agent)
        if pending is not None:
            raise Conflict(
                f"a destroyed {agent}'s directories are still to be trashed on agent host "
                f"{pending.host or '(local)'}, which is not connected; the name is free once "
                "that host is back"
            )

    # ---- a host (re)registers ---------------------------------------------------------

    async def host_registered(self, host_id: str, applied: Mapping[str, str]) -> None:
        """Once its agents are placed (they may already be running): carry out the trash
        that waited for ``host_id``, seed the repos missing on it (from ``applied``: agent →
        applied config text), and bring its repos' ACLs in line with the tree as it is
        then (a reparent may have happened meanwhile, or happen while this runs)."""
        try:
            remote = {row.name for row in await self.hosts.list()}
            local = self.link.connected_locally(host_id)

            def holds(host: str) -> bool:
                return host == host_id or (local and host not in remote)

            for pending in await self.pending_trash.all():
                if holds(pending.host):
                    trashed = await self._trash_on(host_id, pending.agent)
                    await self.pending_trash.done(pending.agent)
                    log.info(
                        "carried out %s's pending trash on agent host %s: %s",
                        pending.agent,
                        host_id,
                        trashed.moved_to or "nothing was left",
                    )
            # An agent never placed (made with no host, or stopped before its first
            # activation) has its directories on the local disk, as a destroy's trash does.
            assigned = {a.agent: a.host for a in await self.assignments.all()}
            mine = sorted(a for a in {*assigned, *applied} if holds(assigned.get(a, LOCAL)))
            await self._seed_missing(host_id, [a for a in mine if a in applied], applied)
            if mine:
                await self._acls_on(host_id, mine)
        except HiveError as exc:
            log.warning(
                "agent host %s: its agents' directories not brought in line now: %s",
                host_id,
                exc.message,
            )

    async def _seed_missing(
        self, host_id: str, agents: list[str], applied: Mapping[str, str]
    ) -> None:
        if not agents:
            return
        missing = await self.link.calls.ask(
            host_id,
            lambda n: ReposMissingAsk(cmd="repos_missing", ask=n, agents=agents),
            DISK_ASK_WITHIN,
            "which config repos it lacks",
        )
        for agent in missing:
            await self._write_on(
                host_id, agent, applied[agent], f"seed {agent} from meta", missing_only=True
            )
