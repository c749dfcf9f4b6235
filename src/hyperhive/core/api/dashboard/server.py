"""Serving the dashboard: bind (falling back to a free port), record the URL, run.

The URL, and why the configured port was not used, go to
``run/dashboard.json`` (:mod:`.frontdoor`) so ``hivectl up`` can print both
and several hives can run side by side without fighting over one port.
"""

from __future__ import annotations

import logging
import os
import re
import socket

import anyio
from anyio.abc import TaskStatus

from hyperhive.asgiserve import serve_asgi
from hyperhive.core.api.dashboard.app import build_dashboard
from hyperhive.core.api.dashboard.frontdoor import DashboardRecord, write_record
from hyperhive.core.api.dashboard.state import DashboardParts

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
    log.info("dashboard on %s", url)
    task_status.started(url)
    # Shutdown ends the event streams first, so their connections can close.
    await serve_asgi(app, sock, before_shutdown=app.state.dash.closing.set)
