"""The link to agent hosts: who runs which agent, and telling them.

An agent host connects to ``run/hosts.sock`` (or, on another machine, dials
the network link in ``hyperhive.netlink``, which hands its authenticated
WebSocket here as a stream), registers, and from then on receives pushed
``activate``/``deactivate``/``place`` commands; it reports turn state and crashes as
requests, and a remote host forwards its agents' frames (``forward``). When a
host's connection ends, every agent it ran is no longer running — the
coordinator always knows where each agent is.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskStatus

from hyperhive.core.dispatch import Dispatcher
from hyperhive.core.notify import EventBus
from hyperhive.core.sockets import Dispatch, answer
from hyperhive.errors import HiveError, InvalidRequest, PermissionDenied, Unavailable
from hyperhive.framing import FrameDecoder
from hyperhive.netlink.authz import forward_refusal
from hyperhive.protocol import (
    ActivateCmd,
    AgentRequest,
    DeactivateCmd,
    LinkAbandonReq,
    LinkAgentCrashedReq,
    LinkAgentStateReq,
    LinkForwardReq,
    LinkGoodbyeReq,
    LinkRegisterReq,
    LinkRequest,
    MetaChangedCmd,
    PlaceCmd,
    Registered,
    Response,
    decode_frame,
    encode,
    error_response,
    ok_response,
)
from hyperhive.streams import ByteStream
from hyperhive.unixsock import serve_unix_streams

__all__ = ["LINK_TABLE", "HostLink", "TurnState"]

log = logging.getLogger(__name__)

# Forwarded frames in flight per host connection: every agent's long-poll holds one.
MAX_FORWARDS = 4096


@dataclass
class TurnState:
    state: str = "stopped"
    since: float = field(default_factory=time.time)
    needs_login: bool = False


@dataclass
class _Host:
    host_id: str
    stream: ByteStream
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    agents: set[str] = field(default_factory=set)
    leaving: bool = False
    claude_slots: int | None = None
    gone: anyio.Event = field(default_factory=anyio.Event)

    async def push(self, data: bytes) -> None:
        async with self.lock:
            await self.stream.send(data)


class HostLink:
    """Registered hosts and agent placement."""

    def __init__(
        self,
        bus: EventBus,
        max_frame: int,
        on_register: Callable[[str], Awaitable[None]],
        on_crash: Callable[[str, str], Awaitable[None]],
        on_host_lost: Callable[[list[str]], Awaitable[None]],
        agent_api: Callable[[str], Dispatch] | None = None,
    ) -> None:
        self.bus = bus
        self.max_frame = max_frame
        self.hosts: dict[str, _Host] = {}
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
        self.on_register = on_register
        self.on_crash = on_crash
        self.on_host_lost = on_host_lost

    def running(self, agent: str) -> bool:
        return agent in self.placement

    def host_of(self, agent: str) -> str | None:
        return self.placement.get(agent)

    def claude_slots(self) -> dict[str, int | None]:
        """Each connected host's claude slots (None: an older host that did not say)."""
        return {h: host.claude_slots for h, host in sorted(self.hosts.items())}

    def waiting_for_slots(self) -> list[tuple[str, float]]:
        """Running agents queued for a claude slot on their host, longest waiting first."""
        return sorted(
            ((a, t.since) for a, t in self.turns.items() if t.state == "waiting_slot"),
            key=lambda pair: pair[1],
        )

    async def activate(self, cmd: ActivateCmd) -> None:
        """Place ``cmd.agent`` on the least-loaded host (or its current one)."""
        if not self.hosts:
            raise Unavailable(
                f"no agent host is connected, so {cmd.agent} cannot start; run `hivectl up` "
                "(or `hivectl host`)"
            )
        host_id = self.placement.get(cmd.agent) or min(
            self.hosts, key=lambda h: len(self.hosts[h].agents)
        )
        host = self.hosts[host_id]
        host.agents.add(cmd.agent)
        self.placement[cmd.agent] = host_id
        self.incarnations[cmd.agent] = cmd.incarnation
        self.draining.pop(cmd.agent, None)
        self.turns[cmd.agent] = TurnState("idle")
        await host.push(encode(cmd))
        self.bus.emit("agent", agent=cmd.agent, running=True, host=host_id)

    async def place(self, cmd: PlaceCmd) -> None:
        """Tell the host running ``cmd.agent`` its new place in the tree (no restart).

        An agent not running now learns it from its next activation.
        """
        host = self.hosts.get(self.placement.get(cmd.agent, ""))
        if host is None:
            return
        try:
            await host.push(encode(cmd))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the host is going; the agent's next activation carries its place

    async def meta_changed(self, agent: str) -> None:
        """Tell the host running ``agent`` to drop the ``get_agent_meta`` it keeps."""
        host = self.hosts.get(self.placement.get(agent, ""))
        if host is None:
            return
        try:
            await host.push(encode(MetaChangedCmd(cmd="meta_changed", agent=agent)))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the host is going; its next activation of the agent starts empty

    async def deactivate(self, agent: str, graceful: bool = True) -> bool:
        host_id = self.placement.pop(agent, None)
        incarnation = self.incarnations.pop(agent, None)
        if host_id is None:
            return False
        host = self.hosts.get(host_id)
        if host is not None and incarnation is not None:
            self.draining[agent] = (host_id, incarnation)
        self.turns[agent] = TurnState("stopped")
        if host is not None:
            host.agents.discard(agent)
            try:
                await host.push(
                    encode(DeactivateCmd(cmd="deactivate", agent=agent, graceful=graceful))
                )
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
        self.bus.emit("agent", agent=agent, running=False)
        return True

    async def serve(
        self, path: Path, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        await serve_unix_streams(path, self._connection, task_status=task_status)

    async def serve_stream(self, stream: ByteStream, authenticated: str | None = None) -> None:
        """Serve one host connection; ``authenticated``: the host name its credential proved
        (the network link), which is then the only name it may register as."""
        await self._connection(stream, authenticated)

    async def cut(self, host_id: str) -> bool:
        """End a host's link now (its credential was revoked): its agents stop running."""
        host = self.hosts.get(host_id)
        if host is None:
            return False
        log.warning("cutting agent host %s's link", host_id)
        await host.stream.aclose()
        with anyio.move_on_after(10):  # its agents are marked stopped once the reader sees it
            await host.gone.wait()
        return True

    async def _connection(self, stream: ByteStream, authenticated: str | None = None) -> None:
        conn = _Conn(self, stream, anyio.Lock(), authenticated=authenticated)
        decoder = FrameDecoder(self.max_frame)
        slots = anyio.Semaphore(MAX_FORWARDS)
        try:
            async with stream, anyio.create_task_group() as tg:
                while True:
                    try:
                        chunk = await stream.receive(65536)
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        break
                    for frame in decoder.feed(chunk):
                        if isinstance(frame, HiveError):
                            await conn.reply(error_response(None, frame))
                            continue
                        rid, req = self._decode(frame)
                        if isinstance(req, LinkForwardReq):
                            # Concurrent: an agent's long-poll must not hold up the link.
                            await slots.acquire()
                            scope = anyio.CancelScope()  # registered now: abandon may follow
                            conn.inflight.setdefault((req.agent, req.conn), set()).add(scope)
                            tg.start_soon(self._answer_forward, conn, rid, req, slots, scope)
                            continue
                        before = conn.host
                        await conn.reply(await self._handle(rid, req, conn))
                        if before is None and conn.host is not None:
                            # Activations are pushed only after the register reply.
                            await self.on_register(conn.host.host_id)
                tg.cancel_scope.cancel()  # the host is gone: abandon its agents' long-polls
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            if conn.host is not None:
                with anyio.CancelScope(shield=True):
                    await self._lost(conn.host)

    @staticmethod
    def _decode(frame: bytes) -> tuple[Any, Any]:
        try:
            return decode_frame(LinkRequest, frame)
        except HiveError as exc:
            return exc.request_id, exc

    async def _handle(self, rid: Any, req: Any, conn: _Conn) -> Response:
        if isinstance(req, HiveError):
            return error_response(rid, req)
        try:
            return ok_response(rid, await LINK_TABLE(conn, req))
        except HiveError as exc:
            return error_response(rid, exc)

    async def _answer_forward(
        self,
        conn: _Conn,
        rid: Any,
        req: LinkForwardReq,
        slots: anyio.Semaphore,
        scope: anyio.CancelScope,
    ) -> None:
        response: Response | None = None
        try:
            with scope:
                response = await self._handle(rid, req, conn)
        finally:
            slots.release()
            scopes = conn.inflight.get((req.agent, req.conn))
            if scopes is not None:
                scopes.discard(scope)
                if not scopes:
                    del conn.inflight[(req.agent, req.conn)]
        if response is not None:  # abandoned: nobody waits for it
            await conn.reply(response)

    def holder(self, agent: str) -> tuple[str | None, int | None]:
        """The host that may speak for ``agent`` and at which incarnation (a stopping
        agent's host keeps that right until the agent runs again or the host goes)."""
        host = self.placement.get(agent)
        if host is None and agent in self.draining:
            return self.draining[agent]
        return host, self.incarnations.get(agent)

    def api_of(self, agent: str) -> Dispatch:
        if self.agent_api is None:
            raise Unavailable("this coordinator does not serve forwarded agent frames")
        api = self._apis.get(agent)
        if api is None:
            api = self._apis[agent] = self.agent_api(agent)
        return api

    async def _lost(self, host: _Host) -> None:
        self.hosts.pop(host.host_id, None)
        lost = sorted(host.agents)
        for agent in lost:
            self.placement.pop(agent, None)
            self.incarnations.pop(agent, None)
            self.turns[agent] = TurnState("stopped")
            self.bus.emit("agent", agent=agent, running=False)
        for agent, (holder, _) in list(self.draining.items()):
            if holder == host.host_id:
                del self.draining[agent]
        host.gone.set()
        log.warning(
            "agent host %s went away; not running now: %s",
            host.host_id,
            ", ".join(lost) or "(none)",
        )
        self.bus.emit("host", host=host.host_id, connected=False)
        if not host.leaving:
            await self.on_host_lost(lost)


@dataclass
class _Conn:
    """One host's connection: the link, its stream, and the host once registered."""

    link: HostLink
    stream: ByteStream
    lock: anyio.Lock
    host: _Host | None = None
    authenticated: str | None = None
    # Forwarded frames in flight, by (agent, the host's connection id for it).
    inflight: dict[tuple[str, int], set[anyio.CancelScope]] = field(default_factory=dict)

    async def reply(self, response: Response) -> None:
        async with self.lock:
            try:
                await self.stream.send(encode(response))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the host went away; the reader ends the connection

    def registered(self) -> _Host:
        if self.host is None:
            raise InvalidRequest('register first: {"cmd":"register","host_id":…}')
        return self.host


LINK_TABLE: Dispatcher[_Conn] = Dispatcher("host link", LinkRequest)


@LINK_TABLE.on(LinkRegisterReq)
async def _register(conn: _Conn, req: LinkRegisterReq) -> Registered:
    link = conn.link
    if conn.host is not None:
        raise InvalidRequest("this connection already registered")
    if conn.authenticated is not None and req.host_id != conn.authenticated:
        raise PermissionDenied(
            f"this link's credential is agent host {conn.authenticated!r}'s; it cannot "
            f"register as {req.host_id!r}"
        )
    if req.host_id in link.hosts:
        raise InvalidRequest(f"a host named {req.host_id!r} is already connected")
    conn.host = _Host(req.host_id, conn.stream, conn.lock, claude_slots=req.claude_slots)
    link.hosts[req.host_id] = conn.host
    log.info("agent host %s registered (pid %s)", req.host_id, req.pid)
    link.bus.emit("host", host=req.host_id, connected=True)
    return Registered(host_id=req.host_id)


@LINK_TABLE.on(LinkAgentStateReq)
async def _agent_state(conn: _Conn, req: LinkAgentStateReq) -> None:
    if req.agent in conn.registered().agents:
        conn.link.turns[req.agent] = TurnState(req.turn_state, req.since, req.needs_login)
        conn.link.bus.emit(
            "turn",
            agent=req.agent,
            turn_state=req.turn_state,
            since=req.since,
            needs_login=req.needs_login,
        )


@LINK_TABLE.on(LinkGoodbyeReq)
async def _goodbye(conn: _Conn, req: LinkGoodbyeReq) -> None:
    conn.registered().leaving = True


@LINK_TABLE.on(LinkAgentCrashedReq)
async def _agent_crashed(conn: _Conn, req: LinkAgentCrashedReq) -> None:
    host = conn.registered()
    if req.agent in host.agents:
        host.agents.discard(req.agent)
        conn.link.placement.pop(req.agent, None)
        conn.link.incarnations.pop(req.agent, None)
        conn.link.draining.pop(req.agent, None)
        conn.link.turns[req.agent] = TurnState("stopped")
        await conn.link.on_crash(req.agent, req.reason)


@LINK_TABLE.on(LinkForwardReq)
async def _forward(conn: _Conn, req: LinkForwardReq) -> Response:
    host = conn.registered()
    link = conn.link
    refusal = forward_refusal(host.host_id, req.agent, req.incarnation, *link.holder(req.agent))
    if refusal is not None:
        log.warning("refused a frame agent host %s forwarded: %s", host.host_id, refusal)
        raise PermissionDenied(f"forward refused: {refusal}")
    frame = json.dumps(req.frame).encode()
    return await answer(frame, AgentRequest, link.api_of(req.agent), req.agent)


@LINK_TABLE.on(LinkAbandonReq)
async def _abandon(conn: _Conn, req: LinkAbandonReq) -> None:
    conn.registered()
    for scope in conn.inflight.pop((req.agent, req.conn), set()):
        scope.cancel()


LINK_TABLE.seal()
