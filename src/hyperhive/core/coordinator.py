"""The coordinator process: it builds the services from plain parts and runs the lifespan.

No service receives the coordinator: each gets the narrow things it uses, so a
newcomer can read what a service touches from its constructor.
"""

from __future__ import annotations

import functools
import importlib
import logging
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskStatus

from hyperhive.config import HiveConfig, HivePaths
from hyperhive.core.api.agent_api import AgentApi
from hyperhive.core.api.operator_api import OperatorApi
from hyperhive.core.api.watch import OperatorWatch
from hyperhive.core.fleet.agentdisks import AgentDisks
from hyperhive.core.fleet.configmirrors import ConfigMirrors
from hyperhive.core.fleet.host_admin import HostAdmin
from hyperhive.core.fleet.hostlink import HostLink
from hyperhive.core.fleet.logs import LogTails
from hyperhive.core.fleet.moves import Mover
from hyperhive.core.fleet.parts import Fleet
from hyperhive.core.fleet.placement import Placement
from hyperhive.core.fleet.turn_records import TurnRecords
from hyperhive.core.fleet.versions import AgentVersions
from hyperhive.core.infra.agent_sockets import AgentSockets
from hyperhive.core.infra.background import Background
from hyperhive.core.infra.hive_identity import hive_identity
from hyperhive.core.infra.notify import EventBus, Notifier
from hyperhive.core.infra.parts import Infra
from hyperhive.core.infra.snapshots import SnapshotIntake
from hyperhive.core.infra.sockets import serve_unix
from hyperhive.core.mail.broker import Broker
from hyperhive.core.mail.budgets import Budgets
from hyperhive.core.mail.notices import Notices
from hyperhive.core.mail.parts import Mail
from hyperhive.core.mail.scheduler import Scheduler
from hyperhive.core.ops.approvals import Approvals
from hyperhive.core.ops.host_events import HostEventHandlers
from hyperhive.core.ops.lifecycle import Lifecycle
from hyperhive.core.ops.parts import Ops
from hyperhive.core.state.agent_state import AgentState
from hyperhive.core.state.identities import AgentIdentities
from hyperhive.core.state.loose_ends import LooseEnds
from hyperhive.core.state.mirror import MetaMirror
from hyperhive.core.state.parts import HiveState
from hyperhive.core.state.registry import AgentRegistry
from hyperhive.errors import ConfigError, StorageError
from hyperhive.eventloop import loop_name
from hyperhive.fdlimit import check_fd_limit
from hyperhive.protocol import HostRequest
from hyperhive.store import Store, open_store
from hyperhive.store.sqlite import SqliteStore
from hyperhive.topology import TopologyStore

if TYPE_CHECKING:
    from hyperhive.core.api.dashboard.state import DashboardParts

__all__ = ["Coordinator"]

log = logging.getLogger(__name__)


class Coordinator:
    """Owns hive.db, the topology and every socket; decides, never runs agents."""

    def __init__(self, paths: HivePaths, config: HiveConfig, store: Store | None = None) -> None:
        """``store`` defaults to SQLite in the home; any other is opened by :meth:`open`."""
        self.paths = paths
        self.config = config
        paths.run.mkdir(parents=True, exist_ok=True, mode=0o700)
        if store is None:
            if config.store:
                raise ConfigError(
                    "hive.toml's store (or HIVE_STORE_URL) names a database server: "
                    "open the coordinator with `await Coordinator.open(paths, config)`"
                )
            store = SqliteStore(paths.db)
        self.store = store
        # The hive's id, read from the store when the coordinator runs (hive_identity).
        self.hive_id: str | None = None
        self.notifier = notifier = Notifier()
        # Every commit that adds something for an agent wakes its `wait`.
        store.on_change(notifier.notify)
        self.bus = bus = EventBus()
        self.background = background = Background()
        self.broker = broker = Broker(store, notifier, config.max_body_bytes)
        self.loose_ends = loose_ends = LooseEnds(store, config.remind_max_pending)
        self.scheduler = scheduler = Scheduler(store)
        # The tree, applied configs and deploy log live in the store (loaded at run);
        # meta/ is their git mirror.
        self.registry = registry = AgentRegistry(paths, store.meta)
        self.topology_store = topo = TopologyStore(store.topology)
        self.mirror = mirror = MetaMirror(paths, store.meta)
        self.notices = notices = Notices(topo, registry, broker, loose_ends, config.root_agent)
        self.agent_state = agent_state = AgentState(store, bus, notices)
        self.budgets = budgets = Budgets(store, registry, config.budget, broker, notifier, bus)
        # What its hosts' comings and goings set off is handed to it once built (below).
        self.hostlink = hostlink = HostLink(
            bus,
            config.max_frame_bytes,
            agent_api=lambda name: self._agent_api(name),
            leases=store.hosts,
            lease_seconds=config.hostlink.lease_seconds if config.hostlink else 15.0,
        )
        hostlink.serve_versions(AgentVersions(store.agents, notices, loose_ends))
        self.host_admin = host_admin = HostAdmin(store.hosts, hostlink)
        # Agents' snapshots, for a replacement on another host (on_host_loss = "replace").
        hostlink.serve_snapshots(SnapshotIntake(store.snapshots, config.snapshot_max_bytes, bus))
        self.logs = logs = LogTails(paths, hostlink)
        self.turns = turns = TurnRecords(hostlink)
        self.placement = placement = Placement(
            registry, topo, hostlink, agent_state, notices, store.placements, store.hosts
        )
        # Agents' directories are on their hosts' disks: reached by asking those hosts.
        self.disks = disks = AgentDisks(
            hostlink, placement, topo, store.placements, store.hosts, store.trash
        )
        # ... and an ancestor on another host than its descendant edits a mirror of its repo.
        self.config_mirrors = mirrors = ConfigMirrors(
            disks, hostlink, topo, store.placements, store.hosts, background
        )
        placement.on_activated = mirrors.refresh_soon
        self.mover = mover = Mover(
            paths,
            registry,
            hostlink,
            placement,
            store.placements,
            agent_state,
            mirrors.refresh_soon,
        )
        self.sockets = sockets = AgentSockets(
            paths, config, background, lambda name: self._agent_api(name)
        )
        # The forge's and homeserver's admin credentials are used here only (issue #14).
        self.identities = AgentIdentities(config.forge, config.matrix)
        # Each service above takes the layers below it as named groups (core/*/parts.py).
        state = HiveState(registry, topo, mirror, agent_state)
        mail = Mail(broker, loose_ends, scheduler, notices, budgets)
        fleet = Fleet(hostlink, placement, disks, mover, logs, host_admin, turns)
        self.lifecycle = lifecycle = Lifecycle(
            paths,
            config,
            state,
            fleet,
            Infra(bus, background, sockets),
            notices,
            mirrors.refresh_soon,
        )
        self.approvals = approvals = Approvals(
            paths, store, state, fleet, mail, lifecycle, bus, mirrors.refresh_soon
        )
        ops = Ops(lifecycle, approvals)
        hostlink.serve_events(HostEventHandlers(state, fleet, lifecycle, mirrors, background))
        self._agent_api_parts = functools.partial(
            AgentApi,
            state=state,
            mail=mail,
            fleet=fleet,
            ops=ops,
            bus=bus,
            identities=self.identities,
        )
        self.operator_api = OperatorApi(
            paths=paths,
            schema_version=store.schema_version,
            state=state,
            mail=mail,
            fleet=fleet,
            ops=ops,
            bus=bus,
            forge=config.forge,
            watch=OperatorWatch(store, notifier, bus),
        )

    def _agent_api(self, name: str) -> AgentApi:
        """``name``'s API: built per connection, once the hive's id is known (at run)."""
        assert self.hive_id is not None, "the coordinator serves agents only once it runs"
        return self._agent_api_parts(name, hive_name=self.config.name or self.hive_id)

    @classmethod
    async def open(cls, paths: HivePaths, config: HiveConfig) -> Coordinator:
        """A coordinator on the store ``config`` names (refused at once if unreachable)."""
        return cls(paths, config, await open_store(paths.home, config.store))

    # ---- lifespan ------------------------------------------------------------

    async def run(
        self, *, dashboard: bool = False, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until cancelled; ``task_status.started()`` once every socket listens."""
        link_tls = None
        if self.config.hostlink is not None:
            from hyperhive.netlink.server import server_tls

            link_tls = server_tls(self.config.hostlink, self.paths.home)  # refuse bad config now
        await self._load_hive_state()
        fd_problem = check_fd_limit(len(self.registry.known()))
        if fd_problem is not None:
            log.warning("%s", fd_problem)
        for problem in self.identities.problems():
            log.error("%s", problem)
        await self.agent_state.ensure(self.registry.known())
        if self.config.hostlink is not None:
            await self.placement.restore_leases()
        try:
            async with anyio.create_task_group() as tg:
                self.background.bind(tg)
                mf = self.config.max_frame_bytes
                # Agent sockets first: once host.sock answers, every agent socket does too.
                for name in self.registry.known():
                    await self.sockets.open(name)
                await tg.start(
                    functools.partial(
                        serve_unix, self.paths.host_sock, HostRequest, self.operator_api, mf
                    )
                )
                await tg.start(functools.partial(self.hostlink.serve, self.paths.hosts_sock))
                if self.config.hostlink is not None:
                    from hyperhive.netlink.server import HostLinkServer

                    link_server = HostLinkServer(
                        self.hostlink,
                        self.store.hosts,
                        self.config.hostlink,
                        link_tls,
                        self.paths.run / "hostlink.json",
                    )
                    await tg.start(link_server.serve)
                    tg.start_soon(self.hostlink.watch_leases)
                tg.start_soon(self.scheduler.run)
                tg.start_soon(
                    self.agent_state.activity.prune_forever, self.config.activity_keep_days
                )
                if dashboard:
                    # FastAPI's import costs seconds on a busy machine: in a thread, so the
                    # sockets opened above answer meanwhile.
                    await anyio.to_thread.run_sync(
                        importlib.import_module,
                        "hyperhive.core.api.dashboard.server",
                        abandon_on_cancel=True,
                    )
                    from hyperhive.core.api.dashboard.server import serve_dashboard

                    try:
                        await tg.start(serve_dashboard, self.dashboard_parts())
                    except (StorageError, OSError) as exc:
                        # The broker goes on without its dashboard (a full disk while it came
                        # up, say): a hive that stops for its web page loses more than it saves.
                        log.error(
                            "dashboard not started: %s; fix that and restart the coordinator "
                            "(the sockets and hivectl work meanwhile)",
                            exc.message if isinstance(exc, StorageError) else exc,
                        )
                if self.config.runtime == "unsandboxed":
                    log.warning(
                        'RUNTIME IS UNSANDBOXED (hive.toml runtime = "unsandboxed"): agents '
                        "run as this user with the whole filesystem in reach"
                    )
                log.info(
                    "coordinator up: %s (%d agents, event loop %s)",
                    self.paths.home,
                    len(self.registry.known()),
                    loop_name(),
                )
                task_status.started()
        finally:
            self.background.bind(None)
            self.sockets.reset()
            with anyio.CancelScope(shield=True):
                await self.store.close()

    def dashboard_parts(self) -> DashboardParts:
        """What the dashboard uses (imported late: FastAPI loads only when it serves)."""
        from hyperhive.core.api.dashboard.state import DashboardParts

        return DashboardParts(
            paths=self.paths,
            config=self.config,
            ops=self.operator_api,
            bus=self.bus,
            notifier=self.notifier,
            registry=self.registry,
            hostlink=self.hostlink,
            store=self.store,
        )

    async def _load_hive_state(self) -> None:
        """The hive's id, the tree and applied configs from the store (an older home's
        files adopted once), the tree reconciled, the meta mirror caught up and rewritten."""
        self.hive_id = await hive_identity(self.paths, self.store.settings)
        # Handed to every host at registration: the store's id, the same on every coordinator.
        self.hostlink.hive_id = self.hive_id
        await anyio.to_thread.run_sync(self.mirror.ensure)
        await self.mirror.adopt()
        await self.registry.load()
        await self.topology_store.load()
        await self.lifecycle.reconcile("reconcile on coordinator start")
        await self.mirror.sync()
        await self.mirror.restore(self.registry.texts(), self.topology_store.read_cached())
