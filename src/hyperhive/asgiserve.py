"""Running an ASGI app on a listening socket the way the hive's processes do.

Both HTTP servers (the coordinator's dashboard, an agent host's MCP endpoint) run
uvicorn inside an anyio task: no signal handlers of its own (the process's owner
decides), no access log, and on cancellation uvicorn's graceful shutdown — the
lifespan's shutdown, every connection closed — bounded in time, then an abort of
whatever it left open.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator

import anyio
import anyio.lowlevel
import uvicorn

# What uvicorn's Config.load() would import on the event loop as a server starts
# (~0.4 s of a busy loop once the coordinator is up): imported with this module
# instead, which the dashboard imports on a worker thread (coordinator.run).
import uvicorn.lifespan.on
import uvicorn.protocols.http.auto
import uvicorn.protocols.websockets.auto
from starlette.types import ASGIApp

__all__ = ["serve_asgi"]

# uvicorn's own wait for in-flight responses, then ours for the whole shutdown.
GRACE_SECONDS = 2
SHUTDOWN_SECONDS = 5


class _QuietServer(uvicorn.Server):
    """uvicorn without its own signal handlers: the process's owner decides."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_asgi(
    app: ASGIApp, sock: socket.socket, *, before_shutdown: Callable[[], None] | None = None
) -> None:
    """Serve ``app`` on ``sock`` (bound and listening) until cancelled; then shut down
    gracefully (``before_shutdown`` first: e.g. ending event streams) and close ``sock``."""
    server = _QuietServer(
        uvicorn.Config(
            app,
            log_level="warning",
            # At "warning" no access line is ever written, but with the log on uvicorn
            # still renders the client address and quoted path of every request.
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=GRACE_SECONDS,
        )
    )
    done = anyio.Event()
    # Shielded so that cancelling this task shuts uvicorn down its way (below)
    # instead of dropping connections mid-response or the lifespan midway.
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
            try:
                await anyio.sleep_forever()
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_SECONDS):
                    if before_shutdown is not None:
                        before_shutdown()
                    server.should_exit = True
                    await done.wait()
                serving.cancel()
                await _abort_leftovers(server)
    finally:
        sock.close()


async def _abort_leftovers(server: uvicorn.Server) -> None:
    """Drop connections uvicorn's graceful shutdown left open: a closed transport with
    unsent bytes (a client that stopped reading) waits for a drain that never comes,
    and would keep its socket until the garbage collector found it."""
    leftovers = list(server.server_state.connections)
    for conn in leftovers:
        conn.transport.abort()
    if leftovers:
        with anyio.CancelScope(shield=True):
            await anyio.lowlevel.checkpoint()  # abort() closes the socket on the next pass
