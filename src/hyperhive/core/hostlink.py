"""The link to agent hosts: who runs which agent, and telling them.

An agent host connects to ``run/hosts.sock``, registers, and from then on
receives pushed ``activate``/``deactivate``/``place`` commands; it reports turn state
and crashes as requests. When a host's connection ends, every agent it ran
is no longer running — the coordinator always knows where each agent is.
"""

from __future__ import annotations

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
from hyperhive.errors import HiveError, InvalidRequest, Unavailable
from hyperhive.framing import FrameDecoder
from hyperhive.protocol import (
    ActivateCmd,
    DeactivateCmd,
    LinkAgentCrashedReq,
    LinkAgentStateReq,
    LinkGoodbyeReq,
    LinkRegisterReq,
    LinkRequest,
    PlaceCmd,
    Registered,
    Response,
    decode_request,
    encode,
    error_response,
    ok_response,
    peek_id,
)
from hyperhive.unixsock import UnixStream, serve_unix_streams

__all__ = ["LINK_TABLE", "HostLink", "TurnState"]

log = logging.getLogger(__name__)


@dataclass
class TurnState:
    state: str = "stopped"
    since: float = field(default_factory=time.time)
    needs_login: bool = False


@dataclass
class _Host:
    host_id: str
    stream: UnixStream
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    agents: set[str] = field(default_factory=set)
    leaving: bool = False
    claude_slots: int | None = None

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
    ) -> None:
        self.bus = bus
        self.max_frame = max_frame
        self.hosts: dict[str, _Host] = {}
        self.placement: dict[str, str] = {}
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

    async def deactivate(self, agent: str, graceful: bool = True) -> bool:
        host_id = self.placement.pop(agent, None)
        if host_id is None:
            return False
        host = self.hosts.get(host_id)
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

    async def _connection(self, stream: UnixStream) -> None:
        conn = _Conn(self, stream, anyio.Lock())  # replies and pushes share the stream
        decoder = FrameDecoder(self.max_frame)
        try:
            async with stream:
                while True:
                    try:
                        chunk = await stream.receive(65536)
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        break
                    for frame in decoder.feed(chunk):
                        before = conn.host
                        response = await self._handle(frame, conn)
                        async with conn.lock:
                            await stream.send(encode(response))
                        if before is None and conn.host is not None:
                            # Activations are pushed only after the register reply.
                            await self.on_register(conn.host.host_id)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            if conn.host is not None:
                with anyio.CancelScope(shield=True):
                    await self._lost(conn.host)

    async def _handle(self, frame: bytes | HiveError, conn: _Conn) -> Response:
        if isinstance(frame, HiveError):
            return error_response(None, frame)
        rid = peek_id(frame)
        try:
            req: Any = decode_request(LinkRequest, frame)
            return ok_response(rid, await LINK_TABLE(conn, req))
        except HiveError as exc:
            return error_response(rid, exc)

    async def _lost(self, host: _Host) -> None:
        self.hosts.pop(host.host_id, None)
        lost = sorted(host.agents)
        for agent in lost:
            self.placement.pop(agent, None)
            self.turns[agent] = TurnState("stopped")
            self.bus.emit("agent", agent=agent, running=False)
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
    stream: UnixStream
    lock: anyio.Lock
    host: _Host | None = None

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
        conn.link.turns[req.agent] = TurnState("stopped")
        await conn.link.on_crash(req.agent, req.reason)


LINK_TABLE.seal()
