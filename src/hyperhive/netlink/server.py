"""The coordinator's side of the network host link: a WebSocket listener over TCP (TLS).

Why the ``websockets`` library: it is the maintained RFC 6455 implementation
with both ends (the host needs a client; Starlette only serves), TLS through
a plain ``ssl.SSLContext``, per-message size limits, keepalive pings, and a
``process_request`` hook that refuses a bad credential with an HTTP status and
reason *before* any frame is read.

A host authenticates in the handshake: ``Authorization: Bearer <credential>``
and ``Hyperhive-Host: <name>``. The name is believed only because the
credential's hash matches the one stored for it; the link then serves the
connection as that host (``HostLink.serve_stream``), and it may register as
that name only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from http import HTTPStatus
from pathlib import Path

import anyio
from anyio.abc import TaskStatus
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from hyperhive.atomic import atomic_write_text
from hyperhive.core.fleet.hostlink import HostLink
from hyperhive.errors import ConfigError
from hyperhive.netlink.config import HostLinkConfig, split_address
from hyperhive.netlink.credentials import verify_secret
from hyperhive.netlink.expiry import expired_message
from hyperhive.netlink.wsstream import ENVELOPE_BYTES, HOST_HEADER, LINK_PATH, WsStream
from hyperhive.store.base import HostRepo

__all__ = ["HostLinkServer", "server_tls"]

log = logging.getLogger(__name__)

# At shutdown, how long hosts' connection handlers may take to finish (each books its
# host out and marks it seen in the store), and how long cancelled stragglers may take.
STOP_WITHIN = 10.0
CANCELLED_WITHIN = 5.0


def server_tls(config: HostLinkConfig, home: Path) -> ssl.SSLContext | None:
    """The TLS context for ``config`` (cert/key relative to the home), or ``None`` (plain)."""
    problem = config.problem()
    if problem is not None:
        raise ConfigError(problem)
    if config.tls_cert is None or config.tls_key is None:
        return None
    cert, key = home / config.tls_cert, home / config.tls_key
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"[hostlink] cannot load tls_cert {cert} / tls_key {key}: {exc}; both must be "
            "PEM files the coordinator can read"
        ) from exc
    return context


class HostLinkServer:
    """Accepts remote hosts, checks their credentials, and hands each to the link."""

    def __init__(
        self,
        link: HostLink,
        hosts: HostRepo,
        config: HostLinkConfig,
        tls: ssl.SSLContext | None,
        info_file: Path,
    ) -> None:
        self.link = link
        self.hosts = hosts
        self.config = config
        self.tls = tls
        self.info_file = info_file
        # Each handshake that proved a host: its name and its credential's expiry.
        self._proven: dict[ServerConnection, tuple[str, float | None]] = {}

    async def _refusal(self, headers: Headers) -> tuple[HTTPStatus, str] | tuple[str, float | None]:
        """The status and reason to refuse a handshake with, or the proven host name and
        its credential's expiry."""
        name = headers.get(HOST_HEADER, "")
        scheme, _, credential = headers.get("Authorization", "").partition(" ")
        if not name or scheme.lower() != "bearer" or not credential:
            return HTTPStatus.UNAUTHORIZED, (
                f"send the host's name in {HOST_HEADER} and its credential as "
                "Authorization: Bearer (hivectl host does)"
            )
        row = await self.hosts.get(name)
        # Hash the offered credential even for an unknown name: no timing tells names apart.
        known = row.secret_hash if row is not None else "0" * 64
        if not verify_secret(credential, known) or row is None:
            return HTTPStatus.UNAUTHORIZED, (
                f"credential refused for agent host {name!r}: wrong or rotated (the "
                "operator's `hivectl hosts add/rotate` prints the current one)"
            )
        if row.revoked:
            return HTTPStatus.FORBIDDEN, (
                f"agent host {name!r} is revoked; the operator can issue a new credential "
                f"with `hivectl hosts rotate {name}`"
            )
        if row.expires_at is not None and row.expired(time.time()):
            return HTTPStatus.UNAUTHORIZED, expired_message(name, row.expires_at)
        if self.link.name_taken(name):
            return HTTPStatus.CONFLICT, (
                f"an agent host named {name!r} is already connected; stop the other one "
                "or give this one its own name"
            )
        return name, row.expires_at

    async def _process_request(self, conn: ServerConnection, request: Request) -> Response | None:
        if request.path != LINK_PATH:
            return conn.respond(HTTPStatus.NOT_FOUND, f"the host link is at {LINK_PATH}\n")
        verdict = await self._refusal(request.headers)
        if isinstance(verdict[0], HTTPStatus):
            status, reason = verdict
            peer = conn.remote_address
            log.warning("refused an agent host from %s: %s", peer, reason)
            return conn.respond(status, f"{reason}\n")
        name, expires_at = verdict
        self._proven[conn] = (name, expires_at)
        await self.hosts.seen(name, time.time())
        return None

    async def _handler(self, conn: ServerConnection) -> None:
        proven = self._proven.pop(conn, None)
        if proven is None:  # cannot happen: process_request ran first
            await conn.close(1008, "not authenticated")
            return
        name, expires_at = proven
        log.info("agent host %s connected from %s", name, conn.remote_address)
        try:
            await self.link.serve_stream(
                WsStream(conn), authenticated=name, credential_expires=expires_at
            )
        finally:
            with anyio.CancelScope(shield=True):
                await self.hosts.seen(name, time.time())

    async def serve(self, *, task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen until cancelled; ``task_status.started(url)`` with the bound address."""
        host, port = split_address(self.config.listen)
        async with serve(
            self._handler,
            host,
            port,
            ssl=self.tls,
            process_request=self._process_request,
            max_size=self.link.max_frame + ENVELOPE_BYTES,
            compression=None,
            close_timeout=2,
        ) as server:
            bound = next(iter(server.sockets)).getsockname()
            netloc = f"[{bound[0]}]:{bound[1]}" if ":" in bound[0] else f"{bound[0]}:{bound[1]}"
            url = f"{'wss' if self.tls else 'ws'}://{netloc}{LINK_PATH}"
            atomic_write_text(self.info_file, json.dumps({"url": url}), 0o600)
            log.info("host link listening on %s", url)
            task_status.started(url)
            try:
                await anyio.sleep_forever()
            finally:
                self.info_file.unlink(missing_ok=True)
                with anyio.CancelScope(shield=True):
                    await self._stop(server)

    async def _stop(self, server: Server) -> None:
        """End every host's connection and wait, bounded, for its handler to return.

        The handlers are websockets' own asyncio tasks, outside the coordinator's task
        group: leaving the listener without waiting for them (its ``__aexit__`` is
        cancelled with us) orphaned them, and one still busy with the store (a host
        registering) then waited forever on a store closed under it, and the
        coordinator's exit with it. So they finish here, while the store is open.
        """
        server.close()  # new handshakes refused (503), open links closed (1001, going away)
        with anyio.move_on_after(STOP_WITHIN):
            await server.wait_closed()
            return
        stuck = [task for task in server.handler_tasks if not task.done()]
        log.warning(
            "%d agent host connection(s) did not finish in %.0f s: cancelling",
            len(stuck),
            STOP_WITHIN,
        )
        for task in stuck:
            task.cancel()
        if stuck:
            with anyio.move_on_after(CANCELLED_WITHIN):
                await asyncio.wait(stuck)
