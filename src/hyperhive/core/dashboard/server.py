"""Serving the dashboard: bind (falling back to a free port), record the URL, run.

The URL, and why the configured port was not used, go to
``run/dashboard.json`` (:mod:`.frontdoor`) so ``hivectl up`` can print both
and several hives can run side by side without fighting over one port.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
from collections.abc import Iterator

import anyio
import anyio.lowlevel
import uvicorn

# What uvicorn's Config.load() would import on the event loop once the dashboard
# starts, after the coordinator says it is up (~0.4 s of a busy loop): imported
# here instead, with this module, on the worker thread (coordinator.run).
import uvicorn.lifespan.on
import uvicorn.protocols.http.auto
import uvicorn.protocols.websockets.auto
from anyio.abc import TaskStatus

from hyperhive.core.dashboard.app import build_dashboard
from hyperhive.core.dashboard.frontdoor import DashboardRecord, write_record
from hyperhive.core.dashboard.state import DashboardParts

__all__ = ["dashboard_url", "serve_dashboard"]

log = logging.getLogger(__name__)


class _RedactCodes(logging.Filter):
    """Keeps one-click log-in codes out of uvicorn's access log, whoever turns it on."""

    _code = re.compile(r"(?<=code=)[^&\s\"]+")

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                self._code.sub("[redacted]", a) if isinstance(a, str) else a for a in record.args
            )
        return True


def _redact_access_log() -> None:
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, _RedactCodes) for f in access.filters):
        access.addFilter(_RedactCodes())


class _QuietServer(uvicorn.Server):
    """uvicorn without its own signal handlers: the process's owner decides."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _bind(host: str, port: int) -> tuple[socket.socket, str | None]:
    """The listening socket, and why ``port`` was not available (None: it was)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly so asyncio turns TCP_NODELAY on (no delayed-ACK stalls).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        if port == 0:
            sock.close()
            raise
        log.warning(
            "dashboard port %d is busy (%s); using a free port instead (set "
            "dashboard_port in hive.toml to choose)",
            port,
            exc.strerror,
        )
        sock.bind((host, 0))
        sock.listen(128)
        return sock, exc.strerror or str(exc)
    sock.listen(128)
    return sock, None


async def _abort_leftovers(server: uvicorn.Server) -> None:
    """Drop connections uvicorn's graceful shutdown left open: a closed transport with
    unsent bytes (a tab that stopped reading an event stream) waits for a drain that
    never comes, and would be collected unclosed, its socket leaked."""
    leftovers = list(server.server_state.connections)
    for conn in leftovers:
        conn.transport.abort()
    if leftovers:
        with anyio.CancelScope(shield=True):
            await anyio.lowlevel.checkpoint()  # abort() closes the socket on the loop's next pass


def dashboard_url(bind: str, port: int) -> str:
    """The URL an operator opens: a wildcard bind is reached by the machine's name."""
    host = socket.gethostname() if bind in ("", "0.0.0.0", "::") else bind  # noqa: S104
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


async def serve_dashboard(
    parts: DashboardParts, *, task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED
) -> None:
    cfg = parts.config
    sock, busy = _bind(cfg.bind, cfg.dashboard_port)
    port = sock.getsockname()[1]
    url = dashboard_url(cfg.bind, port)
    try:
        app = build_dashboard(parts)
        write_record(parts.paths.run, DashboardRecord(url, os.getpid(), cfg.dashboard_port, busy))
    except BaseException:
        sock.close()  # nobody will serve it: a failed start leaks no listening socket
        raise
    # No access log by default, and codes redacted from it if an operator turns it on:
    # a one-click log-in link carries its code in the query string.
    _redact_access_log()
    server = _QuietServer(
        uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=2,
        )
    )
    log.info("dashboard on %s", url)
    done = anyio.Event()
    # The server runs shielded so that cancelling this task shuts it down
    # gracefully (below) instead of dropping its connections mid-response.
    serving = anyio.CancelScope(shield=True)

    async def run() -> None:
        with serving:
            try:
                await server.serve(sockets=[sock])
            finally:
                done.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            task_status.started(url)
            try:
                await anyio.sleep_forever()
            finally:
                # Graceful even when cancelled: end the event streams, let uvicorn
                # close every connection and run the lifespan's shutdown.
                with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                    app.state.dash.closing.set()
                    server.should_exit = True
                    await done.wait()
                serving.cancel()
                await _abort_leftovers(server)
    finally:
        sock.close()
