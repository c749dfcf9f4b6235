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
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVarTuple

import anyio
import stamina
from anyio.abc import TaskGroup, TaskStatus
from pydantic import TypeAdapter, ValidationError

from hyperhive.agent.activation import Activation, HostParts, activated
from hyperhive.agent.active import ActiveAgent
from hyperhive.agent.admission import Admission, machine_slots, meminfo
from hyperhive.agent.events import TurnStateName
from hyperhive.agent.harness import run_harness
from hyperhive.agent.hostasks import HOST_TABLE, answer
from hyperhive.agent.hostdisk import AgentDisk
from hyperhive.agent.hostreads import HostReads
from hyperhive.agent.hyperhive_tools import hyperhive_surface
from hyperhive.agent.launch import SUBAGENT_CONTROL_SERVER
from hyperhive.agent.moving import HostMoves
from hyperhive.agent.outage import Outage
from hyperhive.agent.spec import AgentSpec
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
from hyperhive.matrix.tools import matrix_surface
from hyperhive.netlink.dialer import LinkRefused, LinkTarget, dial
from hyperhive.netlink.forward import ForwardedSockets
from hyperhive.netlink.lease import HEARTBEATS_PER_LEASE
from hyperhive.permissions import BASH_SERVER, HYPERHIVE_SERVER
from hyperhive.protocol import (
    ActivateCmd,
    HostCapacity,
    LinkAgentCrashedReq,
    LinkAgentStateReq,
    LinkCommand,
    LinkGoodbyeReq,
    LinkHeartbeatReq,
    LinkRegisterReq,
)
from hyperhive.protocol.hostreads import Ask, EventsFollowCmd
from hyperhive.subagent.mcp import control_surface, subagent_surface
from hyperhive.sysusers import adopt_hive_id, ensure_user

__all__ = ["AgentHost", "resolve_claude_bin"]

log = logging.getLogger(__name__)

STOP_TIMEOUT = 120.0
_COMMANDS: TypeAdapter[Any] = TypeAdapter(LinkCommand)
Args = TypeVarTuple("Args")


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
        # Every activation of this host, from the coordinator's activate until it ends;
        # its agent is found (by the surfaces, the API, the reads) only once whole.
        self._activations: dict[str, Activation] = {}
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
        self.app = build_app(self.surfaces, self.agent, self.operator_token, self._active)
        self.base_url = ""
        self._host_parts: HostParts | None = None  # once its HTTP server serves
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
        self.reads = HostReads(self.host_id, paths.logs, self.hive.max_frame_bytes)

    # ---- its agents -------------------------------------------------------------------

    def agent(self, name: str) -> ActiveAgent | None:
        """``name``'s active agent, if it is active here and whole."""
        activation = self._activations.get(name)
        return activation.agent if activation is not None else None

    def activation(self, name: str) -> Activation | None:
        """``name``'s activation here (whole or still prepared), if it has one."""
        return self._activations.get(name)

    @property
    def agents(self) -> dict[str, ActiveAgent]:
        """The active agents of this host that are whole, by name (a snapshot)."""
        return {n: a.agent for n, a in self._activations.items() if a.agent is not None}

    def _active(self) -> tuple[ActiveAgent, ...]:
        return tuple(a.agent for a in self._activations.values() if a.agent is not None)

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
        self._host_parts = HostParts(self.admission, self.base_url, self._report_state)
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
                    agents=sorted(self._activations),
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
            for agent in self._active():  # pushes may have been missed while unlinked
                agent.meta.forget()
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
        """One push from the coordinator, by its handler in the sealed ``HOST_TABLE``."""
        try:
            cmd = _COMMANDS.validate_python(frame)
        except ValidationError as exc:
            log.error("ignoring a malformed command from the coordinator: %s", exc)
            return
        if isinstance(cmd, Ask):
            # Answered in a task: a follower's long wait holds up no other command.
            if self._link is not None and self._tg is not None:
                self._tg.start_soon(answer, self, cmd, self._link)
            return
        await HOST_TABLE(self, cmd)

    def in_background(
        self, fn: Callable[[*Args], Coroutine[Any, Any, object]], *args: *Args
    ) -> None:
        """Run ``fn(*args)`` in the host's task group (the command loop never waits)."""
        assert self._tg is not None  # commands arrive only while it runs
        self._tg.start_soon(fn, *args)

    def follow(self, cmd: EventsFollowCmd) -> None:
        """Feed an agent's events (or say it is not active here) on the current link."""
        if self._link is not None and self._tg is not None:
            self.reads.follow(cmd, self._activations.get(cmd.agent), self._link, self._tg)

    # ---- agents ----------------------------------------------------------------------

    async def activate(self, cmd: ActivateCmd) -> None:
        spec = AgentSpec.of(cmd, self.paths, self.hive)
        current = self._activations.get(cmd.agent)
        if current is not None and current.lifetime.stopping.is_set():
            # A rebuild: the old incarnation is finishing its turn; start after it.
            with anyio.move_on_after(STOP_TIMEOUT):
                await current.lifetime.done.wait()
            current = self._activations.get(cmd.agent)
        if current is not None:
            if current.spec.config == spec.config:
                # The coordinator re-sent what is already running (it restarted): the new
                # incarnation (and a reparent it made meanwhile) needs no restart.
                await self._serve_socket(cmd)  # takes the new activation's incarnation
                self._respec(current, spec)
                if (agent := current.agent) is not None:
                    self._report_state(spec, agent.bus.turn_state, agent.bus.turn_state_since)
                return
            await self.deactivate(cmd.agent, graceful=True)
        await self._serve_socket(cmd)
        activation = self._activations[cmd.agent] = Activation(spec)
        assert self._tg is not None
        self._tg.start_soon(self._supervise, activation)

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
        """A running agent's new place in the tree: a new spec, no restart."""
        activation = self._activations.get(name)
        if activation is not None:
            self._respec(activation, activation.spec.placed(parent, descendants))

    def _respec(self, activation: Activation, spec: AgentSpec) -> None:
        """Hand ``activation`` a new spec; a new place re-binds its config repos (in a
        task: the command loop never waits on it)."""
        moved = not activation.spec.same_place(spec)
        if moved:
            log.info(
                "%s: parent %s, descendants %s",
                spec.name,
                spec.parent or "(root)",
                list(spec.descendants),
            )
        activation.respec(spec)
        if moved and self._tg is not None:
            activation.reach_soon(self._tg)

    def _repos_changed(self, agents: list[str]) -> None:
        """These agents' config repos (or this host's mirrors of them) were just made or
        removed here: the sandboxes of those who may write them follow from their next
        spawn."""
        changed = set(agents)
        for activation in list(self._activations.values()):
            spec = activation.spec
            if (spec.name in changed or changed.intersection(spec.descendants)) and self._tg:
                activation.reach_soon(self._tg)

    def _report_state(self, spec: AgentSpec, state: TurnStateName, since: float) -> None:
        """Tell the coordinator an agent's turn state, as of ``spec``'s incarnation."""
        link, tg = self._link, self._tg
        if link is None or tg is None:
            return
        activation = self._activations.get(spec.name)
        report = LinkAgentStateReq(
            cmd="agent_state",
            agent=spec.name,
            turn_state=state,
            since=since,
            launch_problem=activation.bus.launch_problem if activation is not None else None,
            incarnation=spec.incarnation,
        )

        async def send() -> None:
            try:
                await link.call(report)
            except HiveError as exc:
                log.debug("could not report %s's state: %s", spec.name, exc)

        tg.start_soon(send)

    async def _supervise(self, activation: Activation) -> None:
        name = activation.name
        reason: str | None = None
        with activation.scope:
            try:
                assert self._host_parts is not None  # activations come after it serves
                async with activated(activation, self._host_parts) as agent:
                    await run_harness(agent)
            except Exception as exc:  # contained: one agent's crash is not the host's
                log.exception("agent %s crashed", name)
                reason = f"{type(exc).__name__}: {exc}"
        if self._activations.get(name) is activation:
            del self._activations[name]
            if self.forwarded is not None:
                self.forwarded.close(name)
        activation.lifetime.end()
        # One the coordinator stopped (a fence, a rebuild) is no longer its to restart:
        # a report now would land on the agent's next incarnation, maybe already here.
        stopped = activation.lifetime.stopping.is_set()
        if reason is not None and self._link is not None and not stopped:
            with anyio.CancelScope(shield=True):
                try:
                    await self._link.call(
                        LinkAgentCrashedReq(
                            cmd="agent_crashed",
                            agent=name,
                            reason=reason,
                            incarnation=activation.spec.incarnation,
                        )
                    )
                except HiveError:
                    pass

    async def deactivate(
        self, name: str, graceful: bool = True, grace: float = STOP_TIMEOUT
    ) -> None:
        """Graceful: fence the inbox, let the turn finish; then (or at once) cancel."""
        activation = self._activations.get(name)
        if activation is not None:
            await activation.stop(graceful, grace)

    async def _stopped(self, name: str) -> None:
        """Stop ``name`` gracefully if it runs here; return once it has stopped."""
        activation = self._activations.get(name)
        if activation is None:
            return
        await activation.stop(graceful=True, grace=STOP_TIMEOUT)
        with anyio.move_on_after(STOP_TIMEOUT):
            await activation.lifetime.done.wait()

    async def stop_all(self, graceful: bool = True, grace: float = STOP_TIMEOUT) -> None:
        """Stop every agent; then tell the coordinator this was on purpose, not a crash."""
        async with anyio.create_task_group() as tg:
            for name in list(self._activations):
                tg.start_soon(self.deactivate, name, graceful, grace)
        if self._link is not None:
            try:
                await self._link.call(LinkGoodbyeReq(cmd="goodbye"))
            except HiveError:
                pass
