"""The agent host process: every active agent of this machine, in one process.

It links to the coordinator (``run/hosts.sock``, or on another machine the
network link: ``hyperhive.netlink``), registers, and runs a harness task per
agent it is told to activate; it serves the agents' MCP surfaces and
per-agent API on one loopback HTTP server. A remote host also serves each
agent's socket itself and forwards its frames over the link. An asleep agent is
an awaiting task plus a few routes. One agent's failure is contained: it is
reported to the coordinator and never stops the others.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVarTuple

import anyio
from anyio.abc import TaskGroup, TaskStatus

from hyperhive.agent.activation import Activation, HostParts
from hyperhive.agent.active import ActiveAgent
from hyperhive.agent.admission import Admission, machine_slots, meminfo
from hyperhive.agent.hostdisk import AgentDisk
from hyperhive.agent.hostreads import HostReads
from hyperhive.agent.hyperhive_tools import hyperhive_surface
from hyperhive.agent.launch import SUBAGENT_CONTROL_SERVER
from hyperhive.agent.moving import HostMoves
from hyperhive.agent.roster import STOP_TIMEOUT, Roster
from hyperhive.agent.snapshots import LinkSnapshots
from hyperhive.agent.turnreads import HostTurnReads
from hyperhive.agent.uplink import Uplink
from hyperhive.agent.versions import HostVersions
from hyperhive.agent.web import build_app
from hyperhive.agentreach import sandbox_claude
from hyperhive.asgiserve import serve_asgi
from hyperhive.atomic import atomic_write_text
from hyperhive.bash.mcp import bash_surface
from hyperhive.claudebin import find_claude
from hyperhive.config import MATRIX_SERVER, SUBAGENT_SERVER, HiveConfig, HivePaths
from hyperhive.eventloop import loop_name
from hyperhive.matrix.tools import matrix_surface
from hyperhive.netlink.dialer import LinkTarget
from hyperhive.netlink.forward import ForwardedSockets
from hyperhive.permissions import BASH_SERVER, HYPERHIVE_SERVER
from hyperhive.protocol import (
    ActivateCmd,
    HostCapacity,
    LinkGoodbyeReq,
    LinkHeartbeatReq,
    LinkRegisterReq,
)
from hyperhive.protocol.hostreads import EventsFollowCmd
from hyperhive.subagent.mcp import control_surface, subagent_surface

__all__ = ["AgentHost", "resolve_claude_bin"]

log = logging.getLogger(__name__)

Args = TypeVarTuple("Args")


def resolve_claude_bin(configured: str | None, home: Path | None = None) -> str:
    """The claude this host's agents run, as their sandbox sees it (``hyperhive.claudebin``
    says where it is looked for). Not found: ``configured`` or ``claude`` as it is, and
    each agent says it cannot run claude (the CLI refuses to start before that)."""
    found, _ = find_claude(configured, home)
    return str(sandbox_claude(found)) if found is not None else configured or "claude"


class AgentHost:
    """The host's parts, put together: its agents (:class:`~.roster.Roster`), its link to
    the coordinator (:class:`~.uplink.Uplink`), its HTTP server, and what the
    coordinator's commands and asks act on."""

    def __init__(
        self,
        paths: HivePaths,
        hive: HiveConfig,
        host_id: str | None = None,
        remote: LinkTarget | None = None,
    ) -> None:
        """``remote``: dial the coordinator over the network as that host (its ``paths``
        should then have a run dir of its own); else link over ``run/hosts.sock``."""
        self.paths = paths
        self.versions = HostVersions(find_claude(hive.claude_bin, paths.home)[0])
        claude = resolve_claude_bin(hive.claude_bin, paths.home)
        self.hive = hive.model_copy(update={"claude_bin": claude})
        self.host_id = remote.name if remote else host_id or f"{socket.gethostname()}-{os.getpid()}"
        self.uplink = Uplink(self, paths, self.hive, self.versions, remote)
        self.forwarded = (
            ForwardedSockets(lambda: self.uplink.link, self.hive.max_frame_bytes)
            if remote
            else None
        )
        # Every activation of this host, from the coordinator's activate until it ends.
        self.roster = Roster(paths, self.hive, self.versions, self.forwarded, self.uplink)
        slots = self.hive.claude_slots or machine_slots()
        self.admission = Admission(slots)
        log.info(
            "agent host: %d claude slot(s) (%s)",
            slots,
            "claude_slots in hive.toml" if self.hive.claude_slots else "from memory and cores",
        )
        self.operator_token = secrets.token_urlsafe(32)
        self.surfaces = {
            HYPERHIVE_SERVER: hyperhive_surface(self.agent, paths.home),
            BASH_SERVER: bash_surface(self.agent),
            SUBAGENT_SERVER: subagent_surface(self.agent),
            SUBAGENT_CONTROL_SERVER: control_surface(self.agent),
            MATRIX_SERVER: matrix_surface(self.agent),
        }
        self.app = build_app(self.surfaces, self.agent, self.operator_token, self.roster.active)
        self.base_url = ""
        # No admin credential of the forge or the homeserver is read here (issue #14):
        # the coordinator provisions each agent's identity and hands back its own token.
        self._tg: TaskGroup | None = None
        self.moves = HostMoves(
            paths, self.hive.runtime, lambda: self.uplink.link, self.roster.stopped
        )
        # The coordinator reads this host's agents' logs and turn streams over the link.
        # ... and does its work in their directories (config repos, trash, users).
        self.disk = AgentDisk(
            paths,
            self.host_id,
            isolated=self.hive.runtime == "bwrap",
            repos_changed=self.roster.repos_changed,
        )
        self.reads = HostReads(self.host_id, paths.logs, self.hive.max_frame_bytes)
        self.turn_reads = HostTurnReads(paths, self.host_id, self.hive.max_frame_bytes)

    # ---- its agents -------------------------------------------------------------------

    def agent(self, name: str) -> ActiveAgent | None:
        """``name``'s active agent, if it is active here and whole."""
        return self.roster.agent(name)

    def activation(self, name: str) -> Activation | None:
        """``name``'s activation here (whole or still prepared), if it has one."""
        return self.roster.activation(name)

    @property
    def agents(self) -> dict[str, ActiveAgent]:
        """The active agents of this host that are whole, by name (a snapshot)."""
        return self.roster.agents

    async def activate(self, cmd: ActivateCmd) -> None:
        await self.roster.activate(cmd)

    def place(self, name: str, parent: str | None, descendants: tuple[str, ...]) -> None:
        """A running agent's new place in the tree: a new spec, no restart."""
        self.roster.place(name, parent, descendants)

    async def deactivate(
        self, name: str, graceful: bool = True, grace: float = STOP_TIMEOUT
    ) -> None:
        """Graceful: fence the inbox, let the turn finish; then (or at once) cancel."""
        await self.roster.deactivate(name, graceful, grace)

    async def stop_all(self, graceful: bool = True, grace: float = STOP_TIMEOUT) -> None:
        """Stop every agent; then tell the coordinator this was on purpose, not a crash."""
        await self.roster.stop_all(graceful, grace)
        await self.uplink.tell(LinkGoodbyeReq(cmd="goodbye"))

    # ---- lifespan -----------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        logging.getLogger().addHandler(self.reads.journal)
        try:
            await self._run(task_status)
        finally:
            logging.getLogger().removeHandler(self.reads.journal)

    async def _run(self, task_status: TaskStatus[None]) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            await tg.start(self._serve_http)
            await self.uplink.run(tg, task_status)

    async def _serve_http(self, *, task_status: TaskStatus[None]) -> None:
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on such sockets, and
        # without it every keep-alive response waits ~40 ms for a delayed ACK.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((self.hive.bind, self.hive.agent_host_port))
        sock.listen(512)
        port = sock.getsockname()[1]
        self.base_url = f"http://{self.hive.bind}:{port}"
        assert self._tg is not None
        parts = HostParts(
            self.admission,
            self.base_url,
            self.roster.report_state,
            LinkSnapshots(lambda: self.uplink.link),
        )
        self.roster.open(parts, self._tg)
        atomic_write_text(
            self.paths.run / "agent-host.json",
            json.dumps({"url": self.base_url, "token": self.operator_token, "pid": os.getpid()}),
            0o600,
        )
        log.info(
            "agent host %s serving MCP on %s (event loop %s)",
            self.host_id,
            self.base_url,
            loop_name(),
        )
        task_status.started()
        await serve_asgi(self.app, sock)

    # ---- what the link asks of it ------------------------------------------------------

    def registration(self) -> LinkRegisterReq:
        return LinkRegisterReq(
            cmd="register",
            host_id=self.host_id,
            pid=os.getpid(),
            claude_slots=self.admission.capacity,
            max_agents=self.hive.max_agents,
            agents=self.roster.names(),
        )

    def linked(self) -> None:
        for agent in self.roster.active():  # pushes may have been missed while unlinked
            agent.meta.forget()

    def unlinked(self) -> None:
        self.reads.stop_all()

    def capacity(self) -> HostCapacity:
        """What this host can take now: its claude slots and memory."""
        total, available = meminfo()
        return HostCapacity(
            claude_slots=self.admission.capacity,
            slots_in_use=self.admission.in_use,
            mem_total=total,
            mem_available=available,
        )

    async def heartbeat(self) -> LinkHeartbeatReq:
        """Its capacity, its versions, and the agents it runs that started on others."""
        now = await self.versions.current()
        return LinkHeartbeatReq(
            cmd="heartbeat",
            capacity=self.capacity(),
            versions=now,
            outdated=self.roster.outdated(now),
        )

    def in_background(
        self, fn: Callable[[*Args], Coroutine[Any, Any, object]], *args: *Args
    ) -> None:
        """Run ``fn(*args)`` in the host's task group (the command loop never waits)."""
        assert self._tg is not None  # commands arrive only while it runs
        self._tg.start_soon(fn, *args)

    def follow(self, cmd: EventsFollowCmd) -> None:
        """Feed an agent's events (or say it is not active here) on the current link."""
        link = self.uplink.link
        if link is not None and self._tg is not None:
            self.reads.follow(cmd, self.roster.activation(cmd.agent), link, self._tg)
