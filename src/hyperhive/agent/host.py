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
import math
import os
import random
import secrets
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import stamina
from anyio.abc import TaskGroup, TaskStatus
from pydantic import TypeAdapter, ValidationError

from hyperhive.agent.admission import Admission, machine_slots, meminfo
from hyperhive.agent.events import EventsBus
from hyperhive.agent.harness import run_agent
from hyperhive.agent.hostdisk import AgentDisk
from hyperhive.agent.hostreads import HostReads
from hyperhive.agent.hyperhive_tools import hyperhive_surface
from hyperhive.agent.identities import CoordinatorForge, CoordinatorMatrix
from hyperhive.agent.launch import SUBAGENT_CONTROL_SERVER
from hyperhive.agent.moving import HostMoves
from hyperhive.agent.outage import Outage
from hyperhive.agent.runtime import AgentRuntime
from hyperhive.agent.services import agent_services
from hyperhive.agent.web import build_app
from hyperhive.agentreach import sandbox_claude
from hyperhive.asgiserve import serve_asgi
from hyperhive.atomic import atomic_write_text
from hyperhive.bash.mcp import bash_surface
from hyperhive.claudebin import find_claude
from hyperhive.client import RpcClient, connect
from hyperhive.config import MATRIX_SERVER, SUBAGENT_SERVER, HiveConfig, HivePaths
from hyperhive.errors import HiveError, Unavailable
from hyperhive.eventloop import loop_name
from hyperhive.forge.agent import AgentForge
from hyperhive.matrix.agent import AgentMatrix
from hyperhive.matrix.tools import matrix_surface
from hyperhive.netlink.dialer import LinkRefused, LinkTarget, dial
from hyperhive.netlink.forward import ForwardedSockets
from hyperhive.netlink.lease import HEARTBEATS_PER_LEASE
from hyperhive.permissions import BASH_SERVER, HYPERHIVE_SERVER, ToolGroup
from hyperhive.protocol import (
    ActivateCmd,
    DeactivateCmd,
    FenceReq,
    HostCapacity,
    LinkAgentCrashedReq,
    LinkAgentStateReq,
    LinkCommand,
    LinkGoodbyeReq,
    LinkHeartbeatReq,
    LinkRegisterReq,
    MetaChangedCmd,
    MoveDropCmd,
    MoveInCmd,
    MoveOutCmd,
    PlaceCmd,
)
from hyperhive.protocol.hostreads import LinkAnswerReq
from hyperhive.protocol.link import HostAsk
from hyperhive.subagent.mcp import control_surface, subagent_surface
from hyperhive.sysusers import adopt_hive_id, ensure_user

__all__ = ["AgentHost", "resolve_claude_bin"]

log = logging.getLogger(__name__)

STOP_TIMEOUT = 120.0
_COMMANDS: TypeAdapter[Any] = TypeAdapter(LinkCommand)


def resolve_claude_bin(configured: str | None, home: Path | None = None) -> str:
    """The claude this host's agents run, as their sandbox sees it (``hyperhive.claudebin``
    says where it is looked for). Not found: ``configured`` or ``claude`` as it is, and
    each agent says it cannot run claude (the CLI refuses to start before that)."""
    found, _ = find_claude(configured, home)
    return str(sandbox_claude(found)) if found is not None else configured or "claude"


class AgentHost:
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
        claude = resolve_claude_bin(hive.claude_bin, paths.home)
        self.hive = hive.model_copy(update={"claude_bin": claude})
        self.remote = remote
        self.host_id = remote.name if remote else host_id or f"{socket.gethostname()}-{os.getpid()}"
        self.forwarded = (
            ForwardedSockets(lambda: self._link, self.hive.max_frame_bytes) if remote else None
        )
        self._started = False
        self.runtimes: dict[str, AgentRuntime] = {}
        slots = self.hive.claude_slots or machine_slots()
        self.admission = Admission(slots)
        log.info(
            "agent host: %d claude slot(s) (%s)",
            slots,
            "claude_slots in hive.toml" if self.hive.claude_slots else "from memory and cores",
        )
        self._scopes: dict[str, anyio.CancelScope] = {}
        self.operator_token = secrets.token_urlsafe(32)
        self.surfaces = {
            HYPERHIVE_SERVER: hyperhive_surface(self.runtimes.get, paths.home),
            BASH_SERVER: bash_surface(self.runtimes.get),
            SUBAGENT_SERVER: subagent_surface(self.runtimes.get),
            SUBAGENT_CONTROL_SERVER: control_surface(self.runtimes.get),
            MATRIX_SERVER: matrix_surface(self.runtimes.get),
        }
        self.app = build_app(
            self.surfaces,
            self.runtimes.get,
            self.operator_token,
            lambda: tuple(self.runtimes.values()),
        )
        self.base_url = ""
        # No admin credential of the forge or the homeserver is read here (issue #14):
        # the coordinator provisions each agent's identity and hands back its own token.
        self._link: RpcClient | None = None
        self._link_outage: Outage | None = None  # the local link's (a remote host logs its own)
        self._tg: TaskGroup | None = None
        self.moves = HostMoves(paths, self.hive.runtime, lambda: self._link, self._stopped)
        # The coordinator reads this host's agents' logs and turn streams over the link.
        # ... and does its work in their directories (config repos, trash, users).
        self.disk = AgentDisk(
            paths,
            self.host_id,
            isolated=self.hive.runtime == "bwrap",
            repos_changed=self._repos_changed,
        )
        self.reads = HostReads(
            self.host_id, paths.logs, self.runtimes.get, self.hive.max_frame_bytes, self.disk
        )

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
            if self.remote is not None:
                await self._run_remote(task_status)
                return
            first = True
            outage = Outage(log, "coordinator link down", remind=60.0)
            self._link_outage = outage
            while True:
                try:
                    await self._linked(task_status if first else anyio.TASK_STATUS_IGNORED)
                except (Unavailable, OSError) as exc:
                    outage.failed(exc)
                first = False
                # Jittered: after a failover every host (and agent) reconnects at once.
                await anyio.sleep(random.uniform(0.3, 0.7))

    async def _run_remote(self, task_status: TaskStatus[None]) -> None:
        """Dial the coordinator for ever: jittered exponential backoff between tries (a
        thousand hosts must not reconnect in lock-step), reset once a link was up."""
        assert self.remote is not None
        # Up at once (signals handled, the console says why it cannot link), linked or not.
        self._started = True
        task_status.started()
        while True:
            async for attempt in stamina.retry_context(
                on=(Unavailable, LinkRefused, OSError),
                attempts=None,
                timeout=None,
                wait_initial=0.5,
                wait_max=30.0,
                wait_jitter=1.0,
            ):
                with attempt:
                    try:
                        await self._linked(anyio.TASK_STATUS_IGNORED)
                    except (Unavailable, LinkRefused, OSError) as exc:
                        # The console (stderr) and the log both carry it, with the reason.
                        log.error("agent host %s: %s; retrying", self.host_id, exc)
                        raise
            log.warning("agent host %s: the coordinator link closed; redialling", self.host_id)

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

    async def _linked(self, task_status: TaskStatus[None]) -> None:
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](math.inf)
        if self.remote is not None:
            linking = dial(
                self.remote,
                self.hive.max_frame_bytes,
                on_push=send.send_nowait,
                on_close=send.close,
            )
        else:
            linking = connect(self.paths.hosts_sock, on_push=send.send_nowait, on_close=send.close)
        async with send, linking as link:
            self._link = link
            registered = await link.call(
                LinkRegisterReq(
                    cmd="register",
                    host_id=self.host_id,
                    pid=os.getpid(),
                    claude_slots=self.admission.capacity,
                    max_agents=self.hive.max_agents,
                    agents=sorted(self.runtimes),
                )
            )
            if self._link_outage is not None:
                self._link_outage.ended()
            log.info(
                "agent host %s registered with the coordinator (link epoch %d)",
                self.host_id,
                registered.epoch,
            )
            if registered.hive_id is not None:
                # Before any agent starts: its system user is named after the hive's id.
                await anyio.to_thread.run_sync(adopt_hive_id, self.paths, registered.hive_id)
            for rt in self.runtimes.values():  # pushes may have been missed while unlinked
                rt.meta.forget()
            if not self._started:
                self._started = True
                task_status.started()
            try:
                async with receive, anyio.create_task_group() as beats:
                    if registered.heartbeat_seconds:
                        beats.start_soon(self._heartbeat, link, registered.heartbeat_seconds)
                    async for frame in receive:
                        await self._command(frame)
                    beats.cancel_scope.cancel()
            finally:
                self._link = None
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

    async def _heartbeat(self, link: RpcClient, every: float) -> None:
        """Renew the lease; jittered, so a thousand hosts do not beat in lock-step. A
        heartbeat unanswered for a whole lease means the link is dead though TCP has not
        noticed (a partition): end it, and redial."""
        lease = every * HEARTBEATS_PER_LEASE
        while True:
            await anyio.sleep(every * random.uniform(0.8, 1.0))
            with anyio.move_on_after(lease) as waited:
                try:
                    await link.call(LinkHeartbeatReq(cmd="heartbeat", capacity=self.capacity()))
                except HiveError as exc:
                    log.warning("agent host %s: heartbeat not taken: %s", self.host_id, exc)
            if waited.cancelled_caught:
                log.error(
                    "agent host %s: no answer to a heartbeat within the lease (%.0fs): the "
                    "link to the coordinator is dead; redialling",
                    self.host_id,
                    lease,
                )
                with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                    await link.aclose()  # its reader ends, and with it this link
                return

    async def _command(self, frame: dict[str, Any]) -> None:
        try:
            cmd = _COMMANDS.validate_python(frame)
        except ValidationError as exc:
            log.error("ignoring a malformed command from the coordinator: %s", exc)
            return
        if isinstance(cmd, ActivateCmd):
            await self.activate(cmd)
        elif isinstance(cmd, DeactivateCmd):
            if cmd.fenced:
                log.warning("agent %s fenced by the coordinator: %s", cmd.agent, cmd.fenced)
            await self.deactivate(cmd.agent, graceful=cmd.graceful and not cmd.fenced)
        elif isinstance(cmd, PlaceCmd):
            self.place(cmd.agent, cmd.parent, tuple(cmd.descendants))
        # Moves in tasks: an upload or a fetch is many round trips on this very link.
        elif isinstance(cmd, MoveOutCmd):
            assert self._tg is not None
            self._tg.start_soon(self.moves.move_out, cmd)
        elif isinstance(cmd, MoveInCmd):
            assert self._tg is not None
            self._tg.start_soon(self.moves.move_in, cmd)
        elif isinstance(cmd, MoveDropCmd):
            assert self._tg is not None
            self._tg.start_soon(self.moves.drop, cmd)
        elif isinstance(cmd, MetaChangedCmd):
            if (rt := self.runtimes.get(cmd.agent)) is not None:
                rt.meta.forget()
            if cmd.ask is not None and self._link is not None and self._tg is not None:
                self._tg.start_soon(self._forgotten, self._link, cmd.ask)
        elif isinstance(cmd, HostAsk):
            if self._link is not None and self._tg is not None:
                self.reads.start(cmd, self._link, self._tg)

    @staticmethod
    async def _forgotten(link: RpcClient, ask: int) -> None:
        """Answer a meta change: forgotten (in a task: the command loop never waits)."""
        try:
            await link.call(LinkAnswerReq(cmd="answer", ask=ask))
        except HiveError as exc:
            log.debug("could not acknowledge a meta change: %s", exc)

    # ---- agents ----------------------------------------------------------------------

    async def activate(self, cmd: ActivateCmd) -> None:
        current = self.runtimes.get(cmd.agent)
        if current is not None and current.stopping.is_set():
            # A rebuild: the old incarnation is finishing its turn; start after it.
            with anyio.move_on_after(STOP_TIMEOUT):
                await current.done.wait()
            current = self.runtimes.get(cmd.agent)
        if current is not None:
            if current.config == cmd.config:
                # The coordinator re-sent what is already running (it restarted); a
                # reparent it made meanwhile needs no restart either.
                await self._serve_socket(cmd)  # takes the new activation's incarnation
                current.incarnation = cmd.incarnation
                current.meta.forget()  # a restarted coordinator may run another revision
                self.place(cmd.agent, cmd.parent, tuple(cmd.descendants))
                self._report_state(
                    current.name, current.bus.turn_state, current.bus.turn_state_since
                )
                return
            await self.deactivate(cmd.agent, graceful=True)
        await self._serve_socket(cmd)
        rt = AgentRuntime(
            name=cmd.agent,
            config=cmd.config,
            parent=cmd.parent,
            descendants=tuple(cmd.descendants),
            paths=self.paths,
            hive=self.hive,
            bus=EventsBus(on_state=self._state_reporter(cmd.agent)),
            admission=self.admission,
            incarnation=cmd.incarnation,
        )
        rt.base_url = self.base_url
        if ToolGroup.FORGE in rt.groups:
            if self.hive.forge is not None:
                issuer = CoordinatorForge(rt, self.hive.forge)
                rt.forge = AgentForge(issuer, rt.name, rt.state_dir, owner=None)
            else:
                rt.forge_problem = (
                    f"{rt.name} has the forge group, but this agent host's hive.toml has no "
                    "[forge] url; the operator adds it (README, 'Forge')"
                )
        if rt.config.matrix.enabled:
            if self.hive.matrix is not None:
                rt.matrix = AgentMatrix(
                    CoordinatorMatrix(rt, self.hive.matrix), rt.name, rt.state_dir, rt.config.matrix
                )
            else:
                rt.matrix_problem = (
                    f"{rt.name}'s agent.toml enables [matrix], but hive.toml has no [matrix] "
                    "homeserver; the operator adds one (README, 'Talk to your agents from Matrix')"
                )
        self.runtimes[rt.name] = rt
        assert self._tg is not None
        scope = anyio.CancelScope()
        self._scopes[rt.name] = scope
        self._tg.start_soon(self._supervise, rt, scope)

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
        """A running agent's new place in the tree (see :meth:`AgentRuntime.move`)."""
        rt = self.runtimes.get(name)
        if rt is None or (rt.parent, rt.descendants) == (parent, descendants):
            return
        log.info("%s: parent %s, descendants %s", name, parent or "(root)", list(descendants))
        rt.move(parent, descendants)
        self._reach(rt)

    def _reach(self, rt: AgentRuntime) -> None:
        """Re-bind ``rt``'s config repos in a task: the command loop never waits on it."""
        if self._tg is not None:
            self._tg.start_soon(rt.reach_config_repos)

    def _repos_changed(self, agents: list[str]) -> None:
        """These agents' config repos (or this host's mirrors of them) were just made or
        removed here: the sandboxes of those who may write them follow from their next
        spawn."""
        changed = set(agents)
        for rt in list(self.runtimes.values()):
            if rt.name in changed or changed.intersection(rt.descendants):
                self._reach(rt)

    def _state_reporter(self, name: str) -> Callable[[Any, float], None]:
        def report(state: Any, since: float) -> None:
            self._report_state(name, state, since)

        return report

    def _report_state(self, name: str, state: Any, since: float) -> None:
        link, tg = self._link, self._tg
        if link is None or tg is None:
            return

        rt = self.runtimes.get(name)
        problem = rt.bus.launch_problem if rt is not None else None

        async def send() -> None:
            try:
                await link.call(
                    LinkAgentStateReq(
                        cmd="agent_state",
                        agent=name,
                        turn_state=state,
                        since=since,
                        launch_problem=problem,
                    )
                )
            except HiveError as exc:
                log.debug("could not report %s's state: %s", name, exc)

        tg.start_soon(send)

    async def _supervise(self, rt: AgentRuntime, scope: anyio.CancelScope) -> None:
        reason: str | None = None
        with scope:
            try:
                async with agent_services(rt):
                    await run_agent(rt)
            except Exception as exc:  # contained: one agent's crash is not the host's
                log.exception("agent %s crashed", rt.name)
                reason = f"{type(exc).__name__}: {exc}"
        if self.runtimes.get(rt.name) is rt:
            del self.runtimes[rt.name]
            self._scopes.pop(rt.name, None)
            if self.forwarded is not None:
                self.forwarded.close(rt.name)
        rt.done.set()
        # One the coordinator stopped (a fence, a rebuild) is no longer its to restart:
        # a report now would land on the agent's next incarnation, maybe already here.
        if reason is not None and self._link is not None and not rt.stopping.is_set():
            with anyio.CancelScope(shield=True):
                try:
                    await self._link.call(
                        LinkAgentCrashedReq(
                            cmd="agent_crashed",
                            agent=rt.name,
                            reason=reason,
                            incarnation=rt.incarnation,
                        )
                    )
                except HiveError:
                    pass

    async def deactivate(
        self, name: str, graceful: bool = True, grace: float = STOP_TIMEOUT
    ) -> None:
        """Graceful: fence the inbox, let the turn finish; then (or at once) cancel."""
        rt = self.runtimes.get(name)
        scope = self._scopes.get(name)
        if rt is None or scope is None:
            return
        rt.stopping.set()
        if graceful and rt.rpc is not None:
            try:
                await rt.rpc.call(FenceReq(cmd="fence"))
            except HiveError:
                graceful = False
        if graceful:
            with anyio.move_on_after(grace):
                await rt.done.wait()
        rt.killed.set()
        scope.cancel()

    async def _stopped(self, name: str) -> None:
        """Stop ``name`` gracefully if it runs here; return once it has stopped."""
        rt = self.runtimes.get(name)
        if rt is None:
            return
        await self.deactivate(name, graceful=True)
        with anyio.move_on_after(STOP_TIMEOUT):
            await rt.done.wait()

    async def stop_all(self, graceful: bool = True, grace: float = STOP_TIMEOUT) -> None:
        """Stop every agent; then tell the coordinator this was on purpose, not a crash."""
        async with anyio.create_task_group() as tg:
            for name in list(self.runtimes):
                tg.start_soon(self.deactivate, name, graceful, grace)
        if self._link is not None:
            try:
                await self._link.call(LinkGoodbyeReq(cmd="goodbye"))
            except HiveError:
                pass
