"""The coordinator process: wiring, lifespan and the decisions shared by its APIs."""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

import anyio
import stamina
from anyio.abc import TaskGroup, TaskStatus
from pydantic import BaseModel

from hyperhive import __version__, topology
from hyperhive.config import AgentConfig, HiveConfig, HivePaths, dump_agent_config
from hyperhive.core.agent_api import AgentApi
from hyperhive.core.approvals import Approvals
from hyperhive.core.broker import Broker
from hyperhive.core.hostlink import HostLink
from hyperhive.core.lifecycle import Lifecycle, tail_lines
from hyperhive.core.loose_ends import LooseEnds
from hyperhive.core.meta import MetaStore
from hyperhive.core.notify import EventBus, Notifier
from hyperhive.core.operator_api import OperatorApi
from hyperhive.core.registry import AgentRegistry
from hyperhive.core.scheduler import Scheduler
from hyperhive.core.sockets import Listeners, serve_unix
from hyperhive.errors import ConfigError, Conflict, NotFound, Unavailable
from hyperhive.fdlimit import check_fd_limit
from hyperhive.names import OPERATOR, PARENT_SENTINEL, SYSTEM
from hyperhive.permissions import ToolGroup
from hyperhive.protocol import (
    INBOX_EVENTS,
    ActivateCmd,
    AgentMeta,
    AgentRequest,
    ContainerCrash,
    HostRequest,
    LoggedIn,
    NeedsLogin,
    TurnEndReq,
)
from hyperhive.store import Store, open_store
from hyperhive.store.rows import AgentState as AgentStateRow
from hyperhive.store.sqlite import SqliteStore
from hyperhive.sysusers import ensure_user, remove_user
from hyperhive.topology import TopologyStore

__all__ = ["Coordinator"]

log = logging.getLogger(__name__)


class Coordinator:
    """Owns hive.db, the topology and every socket; decides, never runs agents."""

    def __init__(self, paths: HivePaths, config: HiveConfig, store: Store | None = None) -> None:
        """``store`` defaults to SQLite in the home; any other is opened by :meth:`open`."""
        self.paths = paths
        self.config = config
        self.pid = os.getpid()
        paths.run.mkdir(parents=True, exist_ok=True, mode=0o700)
        if store is None:
            if config.store:
                raise ConfigError(
                    "hive.toml's store (or HIVE_STORE_URL) names a database server: "
                    "open the coordinator with `await Coordinator.open(paths, config)`"
                )
            store = SqliteStore(paths.db)
        self.store = store
        self.notifier = Notifier()
        # Every commit that adds something for an agent wakes its `wait`.
        store.on_change(self.notifier.notify)
        self.bus = EventBus()
        self.broker = Broker(store, self.notifier, config.max_body_bytes)
        self.loose_ends = LooseEnds(store, config.remind_max_pending)
        self.scheduler = Scheduler(store, paths, config.reminder_spill_bytes)
        self.registry = AgentRegistry(paths)
        self.topology_store = TopologyStore(paths.topology)
        self.hostlink = HostLink(
            self.bus,
            config.max_frame_bytes,
            self._host_registered,
            self._agent_crashed,
            self._host_lost,
        )
        self.meta = MetaStore(paths, isolated=config.runtime == "bwrap")
        self.approvals = Approvals(self)
        self.lifecycle = Lifecycle(self)
        self._listeners: Listeners | None = None
        self._tg: TaskGroup | None = None

    @classmethod
    async def open(cls, paths: HivePaths, config: HiveConfig) -> Coordinator:
        """A coordinator on the store ``config`` names (refused at once if unreachable)."""
        return cls(paths, config, await open_store(paths.home, config.store))

    # ---- lifespan ------------------------------------------------------------

    async def run(
        self, *, dashboard: bool = False, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until cancelled; ``task_status.started()`` once every socket listens."""
        await anyio.to_thread.run_sync(self.meta.ensure)
        await anyio.to_thread.run_sync(self._seed_missing_proposed_repos)
        self.reconcile()
        fd_problem = check_fd_limit(len(self.registry.known()))
        if fd_problem is not None:
            log.warning("%s", fd_problem)
        await anyio.to_thread.run_sync(self.meta.commit_meta, "reconcile on coordinator start")
        await self.store.agents.ensure(self.registry.known())
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                self._listeners = Listeners(tg)
                mf = self.config.max_frame_bytes
                # Agent sockets first: once host.sock answers, every agent socket does too.
                for name in self.registry.known():
                    await self.open_agent_socket(name)
                await tg.start(
                    lambda task_status: serve_unix(
                        self.paths.host_sock,
                        HostRequest,
                        OperatorApi(self),
                        mf,
                        task_status=task_status,
                    )
                )
                await tg.start(
                    lambda task_status: self.hostlink.serve(
                        self.paths.hosts_sock, task_status=task_status
                    )
                )
                tg.start_soon(self.scheduler.run)
                if dashboard:
                    from hyperhive.core.dashboard.server import serve_dashboard

                    await tg.start(serve_dashboard, self)
                if self.config.runtime == "unsandboxed":
                    log.warning(
                        'RUNTIME IS UNSANDBOXED (hive.toml runtime = "unsandboxed"): agents '
                        "run as this user with the whole filesystem in reach"
                    )
                log.info(
                    "coordinator up: %s (%d agents)", self.paths.home, len(self.registry.known())
                )
                task_status.started()
        finally:
            with anyio.CancelScope(shield=True):
                await self.store.close()

    def reconcile(self) -> None:
        """Bring topology.json in line with the agents that exist (spec "Reconcile")."""
        current = self.topology_store.read()
        updated = topology.reconcile(current, self.registry.known())
        if updated != current:
            self.topology_store.write(updated)

    def _seed_missing_proposed_repos(self) -> None:
        """Every agent has a proposed config repo, starting from its applied config."""
        for name, config in self.registry.configs.items():
            if not (self.paths.agent_config_repo(name) / ".git").exists():
                self.meta.seed_proposed(name, dump_agent_config(config), f"seed {name} from meta")

    def spawn_task(self, fn: Any, *args: Any) -> None:
        """Run ``fn(*args)`` in the coordinator's task group (lives as long as it does)."""
        assert self._tg is not None
        self._tg.start_soon(fn, *args)

    def close_agent_socket(self, name: str) -> None:
        if self._listeners is not None:
            self._listeners.remove(name)

    def on_destroyed(self, name: str) -> None:
        self.hostlink.turns.pop(name, None)
        remove_user(self.paths, name)

    async def open_agent_socket(self, name: str) -> None:
        """The agent's own socket; under bubblewrap it belongs to the agent's user."""
        assert self._listeners is not None
        owner = None
        if self.config.runtime == "bwrap":
            owner = ensure_user(self.paths, name)
        await self._listeners.add(
            name,
            self.paths.agent_sock(name),
            AgentRequest,
            AgentApi(self, name),
            self.config.max_frame_bytes,
            owner=owner,
        )

    # ---- shared lookups -------------------------------------------------------

    def topology(self) -> dict[str, str | None]:
        return self.topology_store.read_cached()

    def require_agent(self, name: str) -> None:
        if not self.registry.exists(name):
            raise NotFound(f"no agent named {name!r}; `hivectl agents list` shows the hive")

    def resolve_recipient(self, sender: str, to: str) -> str:
        """``<parent>`` → the parent (``operator`` for a root); unknown names refused."""
        if to == PARENT_SENTINEL:
            return self.topology().get(sender) or OPERATOR
        if to == OPERATOR:
            return to
        if not self.registry.exists(to):
            raise NotFound(
                f"unknown recipient {to!r}: no such agent (messages are never dropped "
                "silently); use get_agent_meta or ask your parent for the right name"
            )
        return to

    def submitter_of(self, agent: str) -> str | None:
        """Who hears about ``agent``'s lifecycle: nearest ancestor with ``approvals``,
        else the root manager; None when that would be the agent itself."""
        topo = self.topology()
        for ancestor in topology.ancestors(topo, agent):
            cfg = self.registry.configs.get(ancestor)
            if cfg is not None and ToolGroup.APPROVALS in cfg.tool_groups:
                return ancestor
        root = self.config.root_agent
        if root != agent and self.registry.exists(root):
            return root
        return None

    async def notify_submitter(self, agent: str, event: BaseModel) -> None:
        submitter = self.submitter_of(agent)
        if submitter is None:
            log.info("%s for %s: no submitting agent to tell", event.model_dump()["event"], agent)
            return
        await self.notify_agent(submitter, event)

    async def notify_agent(self, recipient: str, event: BaseModel) -> None:
        """A helper event: urgent ones to the inbox from ``system``, the rest as core todos."""
        data = event.model_dump(mode="json")
        kind = str(data["event"])
        body = json.dumps(data)
        if kind in INBOX_EVENTS:
            await self.broker.send(SYSTEM, recipient, body)
        else:
            await self.loose_ends.todo_upsert(recipient, "core", f"{kind}:{data['agent']}", body)

    # ---- logs -------------------------------------------------------------------

    def agent_log_tail(self, agent: str, lines: int) -> list[str]:
        return tail_lines(self.paths.logs / "agents" / f"{agent}.log", lines)

    def host_journal(self, lines: int) -> dict[str, list[str]]:
        """The coordinator's and agent host's own logs (as ``hivectl up`` writes them)."""
        return {
            name: tail_lines(self.paths.logs / f"{name}.log", lines)
            for name in ("coordinator", "host")
        }

    # ---- agent state ------------------------------------------------------------

    async def set_status(self, agent: str, text: str) -> None:
        await self.store.agents.set_status(agent, text, time.time() if text else None)
        self.bus.emit("status", agent=agent, status_text=text)

    async def agent_meta(self, name: str) -> AgentMeta:
        self.require_agent(name)
        row = await self.store.agents.get(name)
        return AgentMeta(
            name=name,
            hyperhive_rev=__version__,
            running=self.hostlink.running(name),
            status_text=row.status_text,
            status_set_at=row.status_set_at,
            parent=self.topology().get(name),
        )

    async def turn_end(self, agent: str, req: TurnEndReq) -> dict[str, Any]:
        turn = await self.store.agents.record_turn(
            agent, req.outcome, req.context_usage, req.session_id, ack=req.handled
        )
        was_login, compact = turn.was_needs_login, turn.compact_pending
        if req.outcome == "needs_login" and not was_login:
            await self.notify_submitter(agent, NeedsLogin(agent=agent))
        elif req.outcome == "ok" and was_login:
            await self.notify_submitter(agent, LoggedIn(agent=agent))
        return {"compact_pending": compact}

    async def request_compact(self, agent: str, threshold: float) -> dict[str, Any]:
        asked = await self.store.agents.request_compact(agent, threshold)
        if not asked.queued:
            usage = asked.usage
            shown = "unknown (no turn recorded yet)" if usage is None else f"{usage:.0%}"
            raise Conflict(
                f"compact refused: the last turn used {shown} of the context window; "
                f"compaction is allowed above {threshold:.0%}. Nothing was changed"
            )
        usage = asked.usage
        return {
            "queued": True,
            "context_usage": usage,
            "note": "compaction runs when the current turn ends",
        }

    async def agents_view(self) -> list[dict[str, Any]]:
        topo = self.topology()
        rows = {a.name: a for a in await self.store.agents.all()}
        unread = await self.store.messages.unread_counts(OPERATOR)
        out = []
        for name in self.registry.known():
            row = rows.get(name, AgentStateRow(name=name))
            turn = self.hostlink.turns.get(name)
            out.append(
                {
                    "name": name,
                    "parent": topo.get(name),
                    "running": self.hostlink.running(name),
                    "host": self.hostlink.host_of(name),
                    "turn_state": turn.state if turn else "stopped",
                    "turn_state_since": turn.since if turn else None,
                    "status_text": row.status_text,
                    "needs_login": row.needs_login,
                    "broken": self.registry.broken.get(name),
                    "crashed": self.lifecycle.crash_reasons.get(name),
                    "unread_operator_messages": int(unread.get(name, 0)),
                    "last_context_usage": row.last_context_usage,
                }
            )
        return out

    # ---- lifecycle hooks ----------------------------------------------------------

    async def add_agent(self, name: str, config: AgentConfig, parent: str | None) -> None:
        """The operator's own spawn: no approval needed."""
        await self.lifecycle.create(name, config, parent, f"spawn {name} (operator)")

    async def activate(self, name: str) -> None:
        self.lifecycle.crash_reasons.pop(name, None)
        row = await self.store.agents.get(name)
        topo = self.topology()
        await self.hostlink.activate(
            ActivateCmd(
                cmd="activate",
                agent=name,
                config=self.registry.config(name),
                parent=topo.get(name),
                descendants=topology.descendants(topo, name),
                incarnation=row.incarnation + 1,
            )
        )

    async def _host_registered(self, host_id: str) -> None:
        # The store may be away (a database restart, a failover): wait for it with
        # jittered backoff rather than drop the host or take the coordinator down.
        # Activating is idempotent, so a retry after a partial pass is safe.
        async for attempt in stamina.retry_context(
            on=Unavailable, attempts=None, timeout=None, wait_initial=0.5, wait_max=5.0
        ):
            with attempt:
                try:
                    desired = await self.store.agents.desired_running()
                    for name in sorted(self.registry.configs):
                        if name in desired and not self.hostlink.running(name):
                            await self.activate(name)
                except Unavailable as exc:
                    log.warning("agent host %s: cannot activate agents yet: %s", host_id, exc)
                    raise

    async def _agent_crashed(self, agent: str, reason: str) -> None:
        await self.lifecycle.crashed(agent, reason)

    async def _host_lost(self, agents: list[str]) -> None:
        # They come back when a host registers again (hivectl up restarts it).
        for agent in agents:
            self.lifecycle.crash_reasons[agent] = "its agent host died"
            log.warning("agent %s stopped with its host", agent)
            try:
                await self.notify_submitter(
                    agent, ContainerCrash(agent=agent, reason="its agent host died")
                )
            except Unavailable as exc:  # the store is away: say so, stay up
                log.warning("could not tell %s's submitter that it stopped: %s", agent, exc)
