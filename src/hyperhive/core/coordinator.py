"""The coordinator process: wiring, lifespan and the decisions shared by its APIs."""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus
from pydantic import BaseModel

from hyperhive import __version__, topology
from hyperhive.config import AgentConfig, HiveConfig, HivePaths, dump_agent_config
from hyperhive.core.agent_api import AgentApi
from hyperhive.core.approvals import Approvals
from hyperhive.core.broker import Broker, ensure_agent_row
from hyperhive.core.db import Database
from hyperhive.core.hostlink import HostLink
from hyperhive.core.lifecycle import Lifecycle, tail_lines
from hyperhive.core.loose_ends import LooseEnds
from hyperhive.core.meta import MetaStore
from hyperhive.core.notify import EventBus, Notifier
from hyperhive.core.operator_api import OperatorApi
from hyperhive.core.registry import AgentRegistry
from hyperhive.core.scheduler import Scheduler
from hyperhive.core.sockets import Listeners, serve_unix
from hyperhive.errors import Conflict, NotFound
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
    describe,
)
from hyperhive.sysusers import ensure_user, remove_user
from hyperhive.topology import TopologyStore

__all__ = ["Coordinator"]

log = logging.getLogger(__name__)


class Coordinator:
    """Owns hive.db, the topology and every socket; decides, never runs agents."""

    def __init__(self, paths: HivePaths, config: HiveConfig) -> None:
        self.paths = paths
        self.config = config
        self.pid = os.getpid()
        paths.run.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.db = Database(paths.db)
        self.notifier = Notifier()
        self.bus = EventBus()
        self.broker = Broker(self.db, self.notifier, config.max_body_bytes)
        self.loose_ends = LooseEnds(self.db, self.notifier, config.remind_max_pending)
        self.scheduler = Scheduler(self.db, self.notifier, paths, config.reminder_spill_bytes)
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
        await self.db.run(lambda c: [ensure_agent_row(c, a) for a in self.registry.known()])
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
            self.db.close()

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
        body = describe(event)
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
        now = time.time()

        def op(conn: sqlite3.Connection) -> None:
            ensure_agent_row(conn, agent)
            conn.execute(
                "UPDATE agent_state SET status_text = ?, status_set_at = ? WHERE name = ?",
                (text, now if text else None, agent),
            )

        await self.db.run(op)
        self.bus.emit("status", agent=agent, status_text=text)

    async def agent_meta(self, name: str) -> AgentMeta:
        self.require_agent(name)
        row = await self.db.run(lambda c: ensure_agent_row(c, name))
        return AgentMeta(
            name=name,
            hyperhive_rev=__version__,
            running=self.hostlink.running(name),
            status_text=row["status_text"],
            status_set_at=row["status_set_at"],
            parent=self.topology().get(name),
        )

    async def turn_end(self, agent: str, req: TurnEndReq) -> dict[str, Any]:
        await self.broker.ack_ids(agent, req.handled)

        def op(conn: sqlite3.Connection) -> tuple[bool, bool]:
            row = ensure_agent_row(conn, agent)
            conn.execute(
                "UPDATE agent_state SET last_outcome = ?, last_turn_at = ?, "
                "last_context_usage = COALESCE(?, last_context_usage), "
                "session_id = COALESCE(?, session_id), needs_login = ?, compact_pending = 0 "
                "WHERE name = ?",
                (
                    req.outcome,
                    time.time(),
                    req.context_usage,
                    req.session_id,
                    int(req.outcome == "needs_login"),
                    agent,
                ),
            )
            return bool(row["needs_login"]), bool(row["compact_pending"])

        was_login, compact = await self.db.run(op)
        if req.outcome == "needs_login" and not was_login:
            await self.notify_submitter(agent, NeedsLogin(agent=agent))
        elif req.outcome == "ok" and was_login:
            await self.notify_submitter(agent, LoggedIn(agent=agent))
        return {"compact_pending": compact}

    async def request_compact(self, agent: str, threshold: float) -> dict[str, Any]:
        def op(conn: sqlite3.Connection) -> float | None:
            usage = ensure_agent_row(conn, agent)["last_context_usage"]
            if usage is None or usage <= threshold:
                shown = "unknown (no turn recorded yet)" if usage is None else f"{usage:.0%}"
                raise Conflict(
                    f"compact refused: the last turn used {shown} of the context window; "
                    f"compaction is allowed above {threshold:.0%}. Nothing was changed"
                )
            conn.execute("UPDATE agent_state SET compact_pending = 1 WHERE name = ?", (agent,))
            return float(usage)

        usage = await self.db.run(op)
        self.notifier.notify(agent)
        return {
            "queued": True,
            "context_usage": usage,
            "note": "compaction runs when the current turn ends",
        }

    async def agents_view(self) -> list[dict[str, Any]]:
        topo = self.topology()
        rows = await self.db.run(
            lambda c: {r["name"]: dict(r) for r in c.execute("SELECT * FROM agent_state")}
        )
        unread = await self.db.run(
            lambda c: dict(
                c.execute(
                    "SELECT sender, COUNT(*) FROM messages "
                    "WHERE recipient = ? AND acked_at IS NULL GROUP BY sender",
                    (OPERATOR,),
                ).fetchall()
            )
        )
        out = []
        for name in self.registry.known():
            row = rows.get(name, {})
            turn = self.hostlink.turns.get(name)
            out.append(
                {
                    "name": name,
                    "parent": topo.get(name),
                    "running": self.hostlink.running(name),
                    "host": self.hostlink.host_of(name),
                    "turn_state": turn.state if turn else "stopped",
                    "turn_state_since": turn.since if turn else None,
                    "status_text": row.get("status_text", ""),
                    "needs_login": bool(row.get("needs_login", 0)),
                    "broken": self.registry.broken.get(name),
                    "config_warnings": self.registry.warnings(name),
                    "crashed": self.lifecycle.crash_reasons.get(name),
                    "unread_operator_messages": int(unread.get(name, 0)),
                    "last_context_usage": row.get("last_context_usage"),
                }
            )
        return out

    # ---- lifecycle hooks ----------------------------------------------------------

    async def add_agent(self, name: str, config: AgentConfig, parent: str | None) -> None:
        """The operator's own spawn: no approval needed."""
        await self.lifecycle.create(name, config, parent, f"spawn {name} (operator)")

    async def activate(self, name: str) -> None:
        self.lifecycle.crash_reasons.pop(name, None)
        row = await self.db.run(lambda c: ensure_agent_row(c, name))
        topo = self.topology()
        await self.hostlink.activate(
            ActivateCmd(
                cmd="activate",
                agent=name,
                config=self.registry.config(name),
                parent=topo.get(name),
                descendants=topology.descendants(topo, name),
                incarnation=int(row["incarnation"]) + 1,
            )
        )

    async def _host_registered(self, host_id: str) -> None:
        desired = await self.db.run(
            lambda c: {
                r["name"]
                for r in c.execute("SELECT name FROM agent_state WHERE desired_running = 1")
            }
        )
        for name in sorted(self.registry.configs):
            if name in desired and not self.hostlink.running(name):
                await self.activate(name)

    async def _agent_crashed(self, agent: str, reason: str) -> None:
        await self.lifecycle.crashed(agent, reason)

    async def _host_lost(self, agents: list[str]) -> None:
        # They come back when a host registers again (hivectl up restarts it).
        for agent in agents:
            self.lifecycle.crash_reasons[agent] = "its agent host died"
            log.warning("agent %s stopped with its host", agent)
            await self.notify_submitter(
                agent, ContainerCrash(agent=agent, reason="its agent host died")
            )
