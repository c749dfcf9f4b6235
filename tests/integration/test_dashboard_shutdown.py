"""The dashboard's shutdown closes every connection, even one whose client stopped reading.

uvicorn's graceful shutdown closes a connection's transport and waits; a transport with
unsent bytes waits for a drain that never comes, and was left open until the garbage
collector found it (a leaked socket and a ResourceWarning, seen as a flaky browser test).
A real dashboard on loopback and a raw TCP client that pipelines requests and never reads.
"""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import pytest

from hyperhive.config import AgentConfig
from hyperhive.core.api.dashboard.server import serve_dashboard
from tests.support.hive import coordinator, seed_home
from tests.support.surfaces import until

pytestmark = pytest.mark.anyio


ESTABLISHED = 0x01  # /proc/net/tcp's "st"


def _server_end(server_port: int, client_port: int) -> tuple[int, int] | None:
    """The server's socket for this client in ``/proc/net/tcp``: (state, bytes it holds
    unsent); None once the kernel has forgotten it (reset)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = fields[1], fields[2]
        if int(local.split(":")[1], 16) == server_port and int(remote.split(":")[1], 16) == (
            client_port
        ):
            return int(fields[3], 16), int(fields[4].split(":")[0], 16)
    return None


def _stalled(seen: list[int], end: tuple[int, int] | None, polls: int = 10) -> bool:
    unsent = end[1] if end else 0
    seen.append(unsent)
    return unsent > 0 and seen[-polls:] == [unsent] * polls


def _closed(end: tuple[int, int] | None) -> bool:
    return end is None or end[0] != ESTABLISHED


async def test_a_client_that_stopped_reading_is_dropped_at_shutdown(tmp_path: Path) -> None:
    seed_home(
        tmp_path,
        {"alice": AgentConfig()},
        hive_toml='dashboard_port = 0\ndashboard_auth = "loopback"\n',
    )
    client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # A tiny receive window: the server's buffers fill after a few responses.
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        async with coordinator(tmp_path) as c:
            async with anyio.create_task_group() as tg:
                url = urlsplit(await tg.start(serve_dashboard, c.dashboard_parts()))
                assert url.hostname is not None and url.port is not None
                port = url.port
                client.connect((url.hostname, port))
                request = (
                    f"GET /static/dashboard.js HTTP/1.1\r\nHost: {url.netloc}\r\n\r\n"
                ).encode()
                client.sendall(request * 1000)  # ~10 MB of answers it will never read
                client_port = client.getsockname()[1]
                # Stuck: the kernel's send queue full and no longer growing (20 ms polls).
                seen: list[int] = []
                await until(lambda: _stalled(seen, _server_end(port, client_port)))
                tg.cancel_scope.cancel()  # the dashboard shuts down with the client stuck
            # The server's end is closed (reset) without the client reading another byte;
            # left to uvicorn it stayed established, its bytes queued, for the loop's life.
            await until(lambda: _closed(_server_end(port, client_port)), within=5)
    finally:
        client.close()
