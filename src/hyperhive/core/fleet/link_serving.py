"""Serving agent hosts' connections to the link: one reader per host, its requests
dispatched through ``core.infra.link_table.LINK_TABLE``.

An agent host connects to ``run/hosts.sock`` (or, on another machine, dials
the network link in ``hyperhive.netlink``, which hands its authenticated
WebSocket here as a stream), registers, and from then on receives pushed
commands; it reports turn state and crashes as requests, and a remote host
forwards its agents' frames (``forward``), each answered concurrently.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskStatus

from hyperhive.core.fleet.host_loss import HostLoss
from hyperhive.core.infra.link_table import LINK_TABLE, LinkConn
from hyperhive.core.infra.linked_host import LinkedHost
from hyperhive.errors import HiveError
from hyperhive.framing import FrameDecoder
from hyperhive.netlink import lease
from hyperhive.protocol import (
    LinkForwardReq,
    LinkRequest,
    Response,
    decode_frame,
    error_response,
    ok_response,
)
from hyperhive.protocol.hostreads import LinkStreamItemsReq
from hyperhive.streams import ByteStream
from hyperhive.unixsock import serve_unix_streams

__all__ = ["LinkServing"]

# How long a host connection's end may take to book its agents out.
ENDED_WITHIN = 30.0

# Forwarded frames in flight per host connection: every agent's long-poll holds one.
MAX_FORWARDS = 4096


class LinkServing(HostLoss):
    """Hosts' connections: read, register, dispatch, and book out when they end."""

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
        await self.events.host_registered(host.host_id)
        for agent in sorted(set(reported) - set(first) - host.agents):
            await self._fence(host, agent)
