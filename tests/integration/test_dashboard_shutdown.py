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
from hyperhive.core.dashboard.server import serve_dashboard
from tests.support.hive import coordinator, seed_home
from tests.support.surfaces import until

pytestmark = pytest.mark.anyio


def _unsent(server_port: int, client_port: int) -> int:
    """Bytes the server's kernel holds for the client (``/proc/net/tcp``'s tx_queue)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = fields[1], fields[2]
        if int(local.split(":")[1], 16) == server_port and int(remote.split(":")[1], 16) == (
            client_port
        ):
            return int(fields[4].split(":")[0], 16)
    return 0


def _stalled(seen: list[int], unsent: int, polls: int = 10) -> bool:
    seen.append(unsent)
    return unsent > 0 and seen[-polls:] == [unsent] * polls


def _closed_by_server(sock: socket.socket) -> bool:
    """Drain what arrived; True once the server's end is gone (EOF or reset)."""
    try:
        while chunk := sock.recv(1 << 16):
            del chunk
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True
    return True


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
                client.connect((url.hostname, url.port))
                request = (
                    f"GET /static/dashboard.js HTTP/1.1\r\nHost: {url.netloc}\r\n\r\n"
                ).encode()
                client.sendall(request * 1000)  # ~10 MB of answers it will never read
                client_port = client.getsockname()[1]
                # Stuck: the kernel's send queue full and no longer growing (20 ms polls).
                seen: list[int] = []
                await until(lambda: _stalled(seen, _unsent(url.port or 0, client_port)))
                tg.cancel_scope.cancel()  # the dashboard shuts down with the client stuck
            client.setblocking(False)
            # The server's end is closed by the time serve_dashboard has returned.
            assert _closed_by_server(client)
    finally:
        client.close()
