"""The host link's requests (host -> coordinator), one handler each, dispatched per
connection: who the connection registered as, at which link epoch, decides what it may say."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field

import anyio

from hyperhive.core.infra.linked_host import LinkBook, LinkedHost, MoveReports, TurnState
from hyperhive.core.infra.snapshots import SnapshotIntake
from hyperhive.core.infra.sockets import answer
from hyperhive.dispatch import Dispatcher
from hyperhive.errors import InvalidRequest, PermissionDenied, Unavailable
from hyperhive.netlink.authz import forward_refusal
from hyperhive.netlink.expiry import expired_message
from hyperhive.protocol import (
    AgentRequest,
    Lease,
    LinkAbandonReq,
    LinkAgentCrashedReq,
    LinkAgentStartedReq,
    LinkAgentStateReq,
    LinkForwardReq,
    LinkGoodbyeReq,
    LinkHeartbeatReq,
    LinkMoveDroppedReq,
    LinkMoveGetReq,
    LinkMovePackedReq,
    LinkMovePutReq,
    LinkMoveUnpackedReq,
    LinkRegisterReq,
    LinkRequest,
    LinkSnapshotCommitReq,
    LinkSnapshotGetReq,
    LinkSnapshotPutReq,
    MoveChunk,
    Registered,
    Response,
    SnapshotChunk,
    SnapshotStored,
    encode,
)
from hyperhive.protocol.hostreads import LinkAnswerReq, LinkStreamEndReq, LinkStreamItemsReq
from hyperhive.streams import ByteStream

__all__ = ["LINK_TABLE", "LinkConn"]

log = logging.getLogger(__name__)


@dataclass
class LinkConn:
    """One host's connection: the link, its stream, and the host once registered."""

    link: LinkBook
    stream: ByteStream
    lock: anyio.Lock
    host: LinkedHost | None = None
    authenticated: str | None = None
    credential_expires: float | None = None  # when the credential it proved runs out
    closing: bool = False  # end the link once this reply is sent
    epoch: int = 0  # the link epoch this connection registered with
    reported: list[str] = field(default_factory=list)  # the agents it said it runs
    # Forwarded frames in flight, by (agent, the host's connection id for it).
    inflight: dict[tuple[str, int], set[anyio.CancelScope]] = field(default_factory=dict)

    async def reply(self, response: Response) -> None:
        async with self.lock:
            try:
                await self.stream.send(encode(response))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the host went away; the reader ends the connection

    def registered(self) -> LinkedHost:
        """The host this connection speaks for, refused once a newer link or an
        expired lease has fenced it (the check is by connection, not by body)."""
        host = self.host
        if host is None:
            raise InvalidRequest('register first: {"cmd":"register","host_id":…}')
        if self.link.hosts.get(host.host_id) is not host or host.epoch != self.epoch:
            raise PermissionDenied(
                f"fenced: this link of agent host {host.host_id} (epoch {self.epoch}) is "
                "over — its lease expired or a newer link replaced it; the host must "
                "register again"
            )
        return host


LINK_TABLE: Dispatcher[LinkConn] = Dispatcher("host link", LinkRequest)


@LINK_TABLE.on(LinkRegisterReq)
async def _register(conn: LinkConn, req: LinkRegisterReq) -> Registered:
    link = conn.link
    if conn.host is not None:
        raise InvalidRequest("this connection already registered")
    if conn.authenticated is not None and req.host_id != conn.authenticated:
        raise PermissionDenied(
            f"this link's credential is agent host {conn.authenticated!r}'s; it cannot "
            f"register as {req.host_id!r}"
        )
    now = time.time()
    if link.name_taken(req.host_id, now):
        raise InvalidRequest(f"a host named {req.host_id!r} is already connected")
    remote = conn.authenticated is not None
    expires = now + link.lease_seconds if remote else None
    epoch = await link.next_epoch(req.host_id, remote, now + link.lease_seconds)
    # Its earlier link: a silent one it replaces now, or one that dropped inside its lease.
    previous = link.hosts.pop(req.host_id, None) or link.absent.pop(req.host_id, None)
    host = LinkedHost(
        req.host_id,
        conn.stream,
        conn.lock,
        claude_slots=req.claude_slots,
        max_agents=req.max_agents,
        remote=remote,
        epoch=epoch,
        lease_expires=expires,
        reported=set(req.agents),
    )
    if previous is not None:
        host.agents = previous.agents
        previous.epoch = -1  # its connection, if any is left, is fenced from now on
        if previous.end is not None:
            previous.end.cancel()  # and ended, with the long-polls it still carries
        # What it does not run any more (it restarted) starts again (at-least-once).
        for agent in sorted(host.agents - set(req.agents)):
            host.agents.discard(agent)
            link.placement.pop(agent, None)
            link.incarnations.pop(agent, None)
            link.turns[agent] = TurnState("stopped")
    conn.host, conn.epoch, conn.reported = host, epoch, list(req.agents)
    link.hosts[req.host_id] = host
    log.info("agent host %s registered (pid %s, link epoch %d)", req.host_id, req.pid, epoch)
    link.bus.emit("host", host=req.host_id, connected=True)
    return Registered(
        host_id=req.host_id,
        epoch=epoch,
        heartbeat_seconds=link.heartbeat_seconds(),
        hive_id=link.hive_id,
    )


@LINK_TABLE.on(LinkHeartbeatReq)
async def _heartbeat(conn: LinkConn, req: LinkHeartbeatReq) -> Lease:
    host = conn.registered()
    link = conn.link
    now = time.time()
    if conn.credential_expires is not None and conn.credential_expires <= now:
        # No renewal past the credential: the host is told why, then cut like a revoke
        # (its redial is refused at the handshake with the same words).
        message = expired_message(host.host_id, conn.credential_expires)
        log.warning("cutting agent host %s's link: %s", host.host_id, message)
        host.cut = True
        conn.closing = True
        raise PermissionDenied(message)
    if host.remote:
        expires = now + link.lease_seconds
        if link.leases is not None and not await link.leases.renew(
            host.host_id, conn.epoch, now, expires, req.capacity.model_dump_json()
        ):
            raise PermissionDenied(
                f"fenced: agent host {host.host_id}'s link epoch {conn.epoch} was superseded"
            )
        host.lease_expires = expires
    host.heartbeat_at = now
    host.capacity = req.capacity
    host.claude_slots = req.capacity.claude_slots or host.claude_slots
    if req.versions is not None and req.outdated and link.versions is not None:
        held = {a: v for a, v in req.outdated.items() if a in host.agents}
        await link.versions.outdated(host.host_id, req.versions, held)
    return Lease(epoch=conn.epoch, expires_at=host.lease_expires or now)


@LINK_TABLE.on(LinkAgentStateReq)
async def _agent_state(conn: LinkConn, req: LinkAgentStateReq) -> None:
    host = conn.registered()
    if req.agent not in host.agents and conn.link.holder(req.agent)[0] != host.host_id:
        raise PermissionDenied(
            f"agent host {host.host_id} does not hold {req.agent}: its state report is refused"
        )
    current = conn.link.incarnations.get(req.agent)
    if req.incarnation is not None and req.incarnation != current:
        # Not the agent's current activation: a replaced or stopping runtime's last word
        # (its "stopped" after a restart arrives after the next activation, or between
        # the two): the current one's state stands.
        log.debug(
            "agent host %s reported %s for %s at incarnation %d, not its current one (%s): ignored",
            host.host_id,
            req.turn_state,
            req.agent,
            req.incarnation,
            current,
        )
        return
    if req.agent in host.agents:
        conn.link.turns[req.agent] = TurnState(
            req.turn_state, req.since, req.needs_login, req.launch_problem
        )
        conn.link.bus.emit(
            "turn",
            agent=req.agent,
            turn_state=req.turn_state,
            since=req.since,
            needs_login=req.needs_login,
            launch_problem=req.launch_problem,
        )


@LINK_TABLE.on(LinkAgentStartedReq)
async def _agent_started(conn: LinkConn, req: LinkAgentStartedReq) -> None:
    host = conn.registered()
    link = conn.link
    if req.agent not in host.agents or link.incarnations.get(req.agent) != req.incarnation:
        return  # stopped or replaced since: its next start reports again
    if link.versions is not None:
        await link.versions.started(req.agent, req.versions)


@LINK_TABLE.on(LinkGoodbyeReq)
async def _goodbye(conn: LinkConn, req: LinkGoodbyeReq) -> None:
    conn.registered().leaving = True


@LINK_TABLE.on(LinkAgentCrashedReq)
async def _agent_crashed(conn: LinkConn, req: LinkAgentCrashedReq) -> None:
    host = conn.registered()
    current = conn.link.incarnations.get(req.agent)
    if req.incarnation is not None and current is not None and req.incarnation != current:
        # Its host reports an incarnation the coordinator has since replaced: the live
        # one is not the one that crashed.
        log.info(
            "agent host %s reported incarnation %d of %s crashed; %d is current: ignored",
            host.host_id,
            req.incarnation,
            req.agent,
            current,
        )
        return
    if req.agent in host.agents:
        host.agents.discard(req.agent)
        conn.link.placement.pop(req.agent, None)
        conn.link.incarnations.pop(req.agent, None)
        conn.link.draining.pop(req.agent, None)
        conn.link.forget_api(req.agent)
        conn.link.turns[req.agent] = TurnState("stopped")
        await conn.link.events.agent_crashed(req.agent, req.reason)


@LINK_TABLE.on(LinkForwardReq)
async def _forward(conn: LinkConn, req: LinkForwardReq) -> Response:
    host = conn.registered()
    link = conn.link
    refusal = forward_refusal(host.host_id, req.agent, req.incarnation, *link.holder(req.agent))
    if refusal is not None and link.lost.get(req.agent) == host.host_id:
        refusal = (
            f"fenced: agent host {host.host_id}'s lease expired while it held {req.agent!r}, "
            "so its acks and writes for it are void"
        )
    if refusal is not None:
        log.warning("refused a frame agent host %s forwarded: %s", host.host_id, refusal)
        raise PermissionDenied(f"forward refused: {refusal}")
    frame = json.dumps(req.frame).encode()
    return await answer(frame, AgentRequest, link.api_of(req.agent), req.agent)


@LINK_TABLE.on(LinkAbandonReq)
async def _abandon(conn: LinkConn, req: LinkAbandonReq) -> None:
    conn.registered()
    for scope in conn.inflight.pop((req.agent, req.conn), set()):
        scope.cancel()


def _moves(conn: LinkConn) -> tuple[str, MoveReports]:
    """The registered host a move report comes from, and where it goes."""
    host = conn.registered()
    if conn.link.moves is None:
        raise Unavailable("this coordinator does not move agents")
    return host.host_id, conn.link.moves


@LINK_TABLE.on(LinkMovePutReq)
async def _move_put(conn: LinkConn, req: LinkMovePutReq) -> None:
    host, moves = _moves(conn)
    await moves.put(host, req)


@LINK_TABLE.on(LinkMovePackedReq)
async def _move_packed(conn: LinkConn, req: LinkMovePackedReq) -> None:
    host, moves = _moves(conn)
    await moves.packed(host, req)


@LINK_TABLE.on(LinkMoveGetReq)
async def _move_get(conn: LinkConn, req: LinkMoveGetReq) -> MoveChunk:
    host, moves = _moves(conn)
    return await moves.get(host, req)


@LINK_TABLE.on(LinkMoveUnpackedReq)
async def _move_unpacked(conn: LinkConn, req: LinkMoveUnpackedReq) -> None:
    host, moves = _moves(conn)
    await moves.unpacked(host, req)


@LINK_TABLE.on(LinkMoveDroppedReq)
async def _move_dropped(conn: LinkConn, req: LinkMoveDroppedReq) -> None:
    host, moves = _moves(conn)
    await moves.dropped(host, req)


def _snapshots(conn: LinkConn, agent: str, incarnation: int) -> tuple[str, SnapshotIntake]:
    """The registered host a snapshot request comes from, if it holds ``agent`` now at
    ``incarnation`` (the forward rule: a stale or fenced host neither writes nor reads
    an agent's snapshot), and where it goes."""
    host = conn.registered()
    link = conn.link
    if link.snapshots is None:
        raise Unavailable("this coordinator keeps no snapshots")
    refusal = forward_refusal(host.host_id, agent, incarnation, *link.holder(agent))
    if refusal is not None:
        raise PermissionDenied(f"snapshot refused: {refusal}")
    return host.host_id, link.snapshots


@LINK_TABLE.on(LinkSnapshotPutReq)
async def _snapshot_put(conn: LinkConn, req: LinkSnapshotPutReq) -> None:
    host, intake = _snapshots(conn, req.agent, req.incarnation)
    await intake.put(host, req)


@LINK_TABLE.on(LinkSnapshotCommitReq)
async def _snapshot_commit(conn: LinkConn, req: LinkSnapshotCommitReq) -> SnapshotStored:
    host, intake = _snapshots(conn, req.agent, req.incarnation)
    return await intake.commit(host, req)


@LINK_TABLE.on(LinkSnapshotGetReq)
async def _snapshot_get(conn: LinkConn, req: LinkSnapshotGetReq) -> SnapshotChunk:
    host, intake = _snapshots(conn, req.agent, req.incarnation)
    return await intake.get(host, req)


@LINK_TABLE.on(LinkAnswerReq)
async def _answer(conn: LinkConn, req: LinkAnswerReq) -> None:
    conn.link.calls.answered(conn.registered().host_id, req)


@LINK_TABLE.on(LinkStreamItemsReq)
async def _stream_items(conn: LinkConn, req: LinkStreamItemsReq) -> None:
    await conn.link.calls.items(conn.registered().host_id, req)


@LINK_TABLE.on(LinkStreamEndReq)
async def _stream_end(conn: LinkConn, req: LinkStreamEndReq) -> None:
    conn.link.calls.ended(conn.registered().host_id, req)


LINK_TABLE.seal()
