"""The link to agent hosts: who runs which agent, and telling them.

An agent host connects to ``run/hosts.sock`` (or, on another machine, dials
the network link in ``hyperhive.netlink``, which hands its authenticated
WebSocket here as a stream), registers, and from then on receives pushed
``activate``/``deactivate``/``place`` commands; it reports turn state and crashes as
requests, and a remote host forwards its agents' frames (``forward``).

When a local host's connection ends, every agent it ran is no longer running.
A remote host holds a lease (``hyperhive.netlink.lease``) that its heartbeats
renew: its connection dropping leaves its agents placed until the lease
expires, so a host that redials in time keeps them; past it they are
``lost``, and a returning host is fenced by its link epoch.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskStatus

from hyperhive.core.link_table import LINK_TABLE, LinkConn
from hyperhive.core.linked_host import LinkBook, LinkedHost, TurnState
from hyperhive.errors import HiveError, Unavailable
from hyperhive.framing import FrameDecoder
from hyperhive.names import listed
from hyperhive.netlink import lease
from hyperhive.protocol import (
    ActivateCmd,
    DeactivateCmd,
    LinkForwardReq,
    LinkRequest,
    MetaChangedAsk,
    PlaceCmd,
    Req,
    Response,
    decode_frame,
    encode,
    error_response,
    ok_response,
)
from hyperhive.protocol.hostreads import AgentSnapshot, AgentSnapshotAsk, LinkStreamItemsReq
from hyperhive.streams import ByteStream
from hyperhive.unixsock import serve_unix_streams

__all__ = ["LINK_TABLE", "HostLink", "LinkedHost", "TurnState"]

log = logging.getLogger(__name__)

# How long a host connection's end may take to book its agents out.
ENDED_WITHIN = 30.0

# Forwarded frames in flight per host connection: every agent's long-poll holds one.
MAX_FORWARDS = 4096
# How long a meta change's reply waits for the host to drop the answer it keeps: the
# change is stored either way; past this a stale get_agent_meta is possible, and logged.
META_FORGET_WITHIN = 5.0
# How long a host has to answer for an agent's turn state.
STATE_WITHIN = 5.0


class HostLink(LinkBook):
    """Serving hosts' connections, and telling them what to run."""

    async def activate(self, cmd: ActivateCmd, host: str | None = None) -> None:
        """Place ``cmd.agent`` on ``host``, else its current one, else the least loaded."""
        if not self.hosts:
            raise Unavailable(
                f"no agent host is connected, so {cmd.agent} cannot start; run `hivectl up` "
                "(or `hivectl host`)"
            )
        host_id = host or self.placement.get(cmd.agent)
        if host_id is not None and host_id not in self.hosts:
            raise Unavailable(
                f"{cmd.agent}'s agent host {host_id} is not connected (its lease holds the "
                "agent until it expires); try again when it is back"
            )
        host_id = host_id or min(self.hosts, key=lambda h: len(self.hosts[h].agents))
        previous = self.all_hosts().get(self.placement.get(cmd.agent, ""))
        if previous is not None and previous.host_id != host_id:
            previous.agents.discard(cmd.agent)
            if previous.host_id in self.hosts:
                # Still running there (a move stops it first): one agent, one runtime.
                await self._fence(previous, cmd.agent)
        target = self.hosts[host_id]
        target.agents.add(cmd.agent)
        self.placement[cmd.agent] = host_id
        self.last_host[cmd.agent] = host_id
        self.incarnations[cmd.agent] = cmd.incarnation
        self.draining.pop(cmd.agent, None)
        self.lost.pop(cmd.agent, None)
        self.turns[cmd.agent] = TurnState("idle")
        await target.push(encode(cmd))
        self.bus.emit("agent", agent=cmd.agent, running=True, host=host_id)

    def serving(self, agent: str) -> str:
        """The connected host ``agent`` runs on (``Unavailable`` if none)."""
        host = self.host_of(agent)
        if host is None:
            raise Unavailable(f"{agent} is not running on any agent host")
        return host

    async def snapshot(self, agent: str) -> AgentSnapshot:
        """``agent``'s authoritative turn state, asked of the host that holds it."""
        return await self.calls.ask(
            self.serving(agent),
            lambda n: AgentSnapshotAsk(cmd="agent_snapshot", ask=n, agent=agent),
            STATE_WITHIN,
            f"{agent}'s turn state",
        )

    async def push(self, host_id: str, cmd: Req[None]) -> bool:
        """Push ``cmd`` to ``host_id``; ``False`` if it is not connected (or just went)."""
        host = self.hosts.get(host_id)
        if host is None:
            return False
        try:
            await host.push(encode(cmd))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False
        return True

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
        """Have the host running ``agent`` drop the ``get_agent_meta`` it keeps, and wait
        (bounded) until it has: the agent's next MCP call reaches that host by another
        connection, so a push alone could be overtaken by it."""
        host_id = self.placement.get(agent)
        if host_id is None or host_id not in self.hosts:
            return
        try:
            await self.calls.ask(
                host_id,
                lambda ask: MetaChangedAsk(cmd="meta_changed", agent=agent, ask=ask),
                META_FORGET_WITHIN,
                f"{agent}'s meta change",
            )
        except Unavailable as exc:
            # Gone: its next activation of the agent starts empty. Slow: said, not fatal.
            log.warning("%s's host may still show its old meta: %s", agent, exc.message)

    async def deactivate(self, agent: str, graceful: bool = True) -> bool:
        host_id = self.placement.pop(agent, None)
        incarnation = self.incarnations.pop(agent, None)
        if host_id is None:
            return False
        self._apis.pop(agent, None)
        host = self.all_hosts().get(host_id)
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

    async def serve_stream(
        self,
        stream: ByteStream,
        authenticated: str | None = None,
        credential_expires: float | None = None,
    ) -> None:
        """Serve one host connection; ``authenticated``: the host name its credential proved
        (the network link), which is then the only name it may register as, until
        ``credential_expires`` (its next heartbeat after that is refused, and the link cut)."""
        await self._connection(stream, authenticated, credential_expires)

    async def cut(self, host_id: str) -> bool:
        """End a host's link now (its credential was revoked): its agents stop running."""
        away = self.absent.pop(host_id, None)
        if away is not None:  # no connection to end: its agents stop now
            away.cut = True
            await self._drop(away, lease_expired=False)
            return True
        host = self.hosts.get(host_id)
        if host is None:
            return False
        log.warning("cutting agent host %s's link", host_id)
        host.cut = True
        if host.stream is not None:
            await host.stream.aclose()
        with anyio.move_on_after(10):  # its agents are marked stopped once the reader sees it
            await host.gone.wait()
        return True

    async def _connection(
        self,
        stream: ByteStream,
        authenticated: str | None = None,
        credential_expires: float | None = None,
    ) -> None:
        conn = LinkConn(
            self,
            stream,
            anyio.Lock(),
            authenticated=authenticated,
            credential_expires=credential_expires,
        )
        decoder = FrameDecoder(self.max_frame)
        slots = anyio.Semaphore(MAX_FORWARDS)
        try:
            async with stream, anyio.create_task_group() as tg:
                gone = False
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
                        if isinstance(req, LinkStreamItemsReq):
                            # Concurrent: held while the stream's reader is behind.
                            await slots.acquire()
                            tg.start_soon(self._answer_items, conn, rid, req, slots)
                            continue
                        if isinstance(req, LinkForwardReq):
                            # Concurrent: an agent's long-poll must not hold up the link.
                            await slots.acquire()
                            scope = anyio.CancelScope()  # registered now: abandon may follow
                            conn.inflight.setdefault((req.agent, req.conn), set()).add(scope)
                            tg.start_soon(self._answer_forward, conn, rid, req, slots, scope)
                            continue
                        before = conn.host
                        await conn.reply(await self._handle(rid, req, conn))
                        if conn.closing:  # told why (its credential expired): now cut
                            break
                        if before is None and conn.host is not None:
                            conn.host.end = tg.cancel_scope
                            # Activations are pushed only after the register reply.
                            try:
                                await self._registered(conn.host, conn.reported)
                            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                                # The host went while its agents were being pushed: its
                                # connection ends here. (Raised inside the task group, this
                                # reached the outer handler wrapped in an ExceptionGroup,
                                # which it did not match, and stopped ``serve``.)
                                gone = True
                                break
                    if gone or conn.closing:
                        break
                tg.cancel_scope.cancel()  # the host is gone: abandon its agents' long-polls
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            if conn.host is not None:
                # Shielded so a coordinator shutting down still books the host out, but
                # bounded: what it calls may wait for a store that is itself going away.
                with anyio.CancelScope(shield=True, deadline=anyio.current_time() + ENDED_WITHIN):
                    await self._ended(conn.host)

    @staticmethod
    def _decode(frame: bytes) -> tuple[Any, Any]:
        try:
            return decode_frame(LinkRequest, frame)
        except HiveError as exc:
            return exc.request_id, exc

    async def _handle(self, rid: Any, req: Any, conn: LinkConn) -> Response:
        if isinstance(req, HiveError):
            return error_response(rid, req)
        try:
            return ok_response(rid, await LINK_TABLE(conn, req))
        except HiveError as exc:
            return error_response(rid, exc)

    async def _answer_forward(
        self,
        conn: LinkConn,
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

    async def _answer_items(
        self, conn: LinkConn, rid: Any, req: LinkStreamItemsReq, slots: anyio.Semaphore
    ) -> None:
        try:
            response = await self._handle(rid, req, conn)
        finally:
            slots.release()
        await conn.reply(response)

    async def _registered(self, host: LinkedHost, reported: list[str]) -> None:
        """After a registration's reply: fence what the host may no longer run, let
        placement start what should run, then fence whatever it still runs unasked."""
        first = lease.fenced_agents(host.host_id, reported, self.placement, self.lost)
        for agent in first:
            await self._fence(host, agent)
        await self.on_register(host.host_id)
        for agent in sorted(set(reported) - set(first) - host.agents):
            await self._fence(host, agent)

    async def _fence(self, host: LinkedHost, agent: str) -> None:
        why = (
            f"agent host {host.host_id}'s lease expired while it held {agent}"
            if self.lost.get(agent) == host.host_id
            else f"agent host {host.host_id} does not hold {agent} any more"
        )
        log.warning("fencing %s on agent host %s: %s", agent, host.host_id, why)
        try:
            await host.push(
                encode(DeactivateCmd(cmd="deactivate", agent=agent, graceful=False, fenced=why))
            )
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # gone again: it is told when it next registers

    async def expire_leases(self, now: float | None = None) -> list[str]:
        """Drop every remote host whose lease is over; return their names. A host still
        connected but silent (a partition) has its link ended too."""
        now = time.time() if now is None else now
        over = [h for h in self.all_hosts().values() if lease.expired(h.lease_expires, now)]
        for host in over:
            log.warning(
                "agent host %s's lease expired (last heard %.1fs ago)",
                host.host_id,
                now - host.last_heard,
            )
            self.absent.pop(host.host_id, None)
            if self.hosts.get(host.host_id) is host:
                del self.hosts[host.host_id]
                if host.end is not None:
                    host.end.cancel()  # a partitioned link: its frames no longer count
            await self._drop(host, lease_expired=True)
        return [h.host_id for h in over]

    async def watch_leases(self) -> None:
        """Expire leases for ever (a fifth of a lease late at most)."""
        while True:
            await anyio.sleep(min(1.0, self.lease_seconds / 5))
            try:
                await self.expire_leases()
            except HiveError as exc:  # telling someone failed: the watch goes on
                log.error("while expiring host leases: %s", exc)

    async def _ended(self, host: LinkedHost) -> None:
        """A host's connection ended: a remote host inside its lease keeps its agents."""
        if self.hosts.get(host.host_id) is not host:
            return  # superseded by its own new link, or its lease already expired
        del self.hosts[host.host_id]
        # Whatever was asked of it on this connection has no one to answer now.
        self.calls.host_gone(host.host_id)
        if (
            host.remote
            and not host.leaving
            and not host.cut
            and not lease.expired(host.lease_expires, time.time())
        ):
            self.absent[host.host_id] = host
            log.warning(
                "agent host %s's link dropped; it holds %s until its lease expires",
                host.host_id,
                listed(sorted(host.agents), empty="no agents"),
            )
            self.bus.emit("host", host=host.host_id, connected=False)
            return
        await self._drop(host, lease_expired=False)

    async def _drop(self, host: LinkedHost, lease_expired: bool) -> None:
        gone = sorted(host.agents)
        for agent in gone:
            self.placement.pop(agent, None)
            self.incarnations.pop(agent, None)
            self._apis.pop(agent, None)
            self.turns[agent] = TurnState("stopped")
            if lease_expired:
                self.lost[agent] = host.host_id
            self.bus.emit("agent", agent=agent, running=False, lost=lease_expired)
        host.agents.clear()
        self.calls.host_gone(host.host_id)
        for agent, (holder, _) in list(self.draining.items()):
            if holder == host.host_id:
                del self.draining[agent]
        host.gone.set()
        log.warning(
            "agent host %s %s; not running now: %s",
            host.host_id,
            "is lost (lease expired)" if lease_expired else "went away",
            listed(gone),
        )
        self.bus.emit("host", host=host.host_id, connected=False)
        if host.leaving:
            return
        if lease_expired and not await self._first_to_lose(host):
            log.info(
                "agent host %s's loss at link epoch %d was handled before (a previous "
                "coordinator): its agents show lost, nobody is told again",
                host.host_id,
                host.epoch,
            )
            return
        await self.on_host_lost(host.host_id, gone, lease_expired)

    async def _first_to_lose(self, host: LinkedHost) -> bool:
        """Record durably that this lease expiry is handled, before anyone is told: a
        coordinator taking over after a failover then neither forgets nor repeats it."""
        if not host.remote or self.leases is None:
            return True
        try:
            return await self.leases.claim_loss(host.host_id, host.epoch)
        except HiveError as exc:  # the store is away: telling twice beats never
            log.warning("could not record agent host %s's loss: %s", host.host_id, exc)
            return True
