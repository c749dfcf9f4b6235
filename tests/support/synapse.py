"""A real Synapse homeserver for the Matrix tests: SQLite, a free loopback port, shared secret.

Started once per test session (it takes seconds) by the ``synapse`` fixture,
bounded in time; skipped with the reason only when ``matrix-synapse`` cannot
be imported. Rate limits are lifted: the tests register and send in bursts.
``TcpGate`` sits between a hive and the homeserver so a test can take the
homeserver "down" (connections refused) and bring it back, on real sockets.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.strays import OWNER_ENV, owner_tag

__all__ = [
    "START_WITHIN",
    "Synapse",
    "TcpGate",
    "Person",
    "Registered",
    "free_port",
    "register",
    "synapse",
]

START_WITHIN = 90.0
SERVER_NAME = "hive.test"

_UNLIMITED = {"per_second": 10000, "burst_count": 10000}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Synapse:
    url: str
    server_name: str
    shared_secret: str
    directory: Path
    proc: subprocess.Popen[bytes]

    def write_secret(self, path: Path) -> Path:
        """The shared secret in a file as the hive wants it (0600)."""
        path.write_text(self.shared_secret + "\n")
        path.chmod(0o600)
        return path

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return (self.directory / "homeserver.log").read_text()[-chars:]
        except OSError:
            return "(no log)"


def _config(d: Path, port: int, secret: str) -> str:
    import json

    def rc(**extra: object) -> str:
        return json.dumps({**_UNLIMITED, **extra})

    # YAML is a superset of JSON: every value below is written as JSON.
    return "\n".join(
        [
            f'server_name: "{SERVER_NAME}"',
            f'pid_file: "{d}/homeserver.pid"',
            "listeners:",
            f"  - port: {port}",
            "    bind_addresses: ['127.0.0.1']",
            "    type: http",
            "    tls: false",
            "    x_forwarded: false",
            "    resources: [{names: [client], compress: false}]",
            f'database: {{name: sqlite3, args: {{database: "{d}/homeserver.db"}}}}',
            f'log_config: "{d}/log.yaml"',
            f'media_store_path: "{d}/media"',
            f'signing_key_path: "{d}/signing.key"',
            f'registration_shared_secret: "{secret}"',
            f'macaroon_secret_key: "{secrets.token_hex(16)}"',
            f'form_secret: "{secrets.token_hex(16)}"',
            "report_stats: false",
            "enable_registration: false",
            "trusted_key_servers: []",
            "suppress_key_server_warning: true",
            "presence: {enabled: false}",
            f"rc_message: {rc()}",
            f"rc_registration: {rc()}",
            f"rc_login: {{address: {rc()}, account: {rc()}, failed_attempts: {rc()}}}",
            f"rc_joins: {{local: {rc()}, remote: {rc()}}}",
            f"rc_invites: {{per_room: {rc()}, per_user: {rc()}, per_issuer: {rc()}}}",
            f"rc_room_creation: {rc()}",
            "",
        ]
    )


_LOG = """version: 1
formatters: {precise: {format: '%(asctime)s %(name)s %(levelname)s %(message)s'}}
handlers:
  file: {class: logging.FileHandler, formatter: precise, filename: "LOG"}
root: {level: WARNING, handlers: [file]}
disable_existing_loggers: false
"""


@contextlib.contextmanager
def run_synapse(d: Path) -> Iterator[Synapse]:
    port, secret = free_port(), secrets.token_hex(16)
    (d / "homeserver.yaml").write_text(_config(d, port, secret))
    (d / "log.yaml").write_text(_LOG.replace("LOG", str(d / "homeserver.log")))
    base = [sys.executable, "-m", "synapse.app.homeserver", "-c", str(d / "homeserver.yaml")]
    subprocess.run([*base, "--generate-keys"], check=True, capture_output=True, timeout=60)
    log = (d / "stdout.log").open("wb")
    # The owner in its environment: a later session stops it if this one is killed.
    env = {**os.environ, OWNER_ENV: owner_tag()}
    proc = subprocess.Popen(
        base, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env
    )
    server = Synapse(f"http://127.0.0.1:{port}", SERVER_NAME, secret, d, proc)
    try:
        deadline = time.monotonic() + START_WITHIN
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"synapse exited with {proc.returncode}:\n{(d / 'stdout.log').read_text()}"
                    f"\n{server.log_tail()}"
                )
            try:
                if httpx.get(f"{server.url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"synapse did not start within {START_WITHIN:.0f}s")
            time.sleep(0.1)
        yield server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    # Found, not imported: its import warns (Twisted deprecations), and it runs in a process
    # of its own anyway.
    if importlib.util.find_spec("synapse") is None:  # pragma: no cover - dev installs have it
        pytest.skip("matrix-synapse is not installed; run scripts/bootstrap --dev")
    with run_synapse(tmp_path_factory.mktemp("synapse")) as server:
        yield server


class TcpGate:
    """A loopback TCP forwarder to ``target`` that a test can close (refusing) and reopen."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self.up()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        """Refuse new connections and cut the open ones (a homeserver that went away)."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.down()


@dataclass(frozen=True)
class Registered:
    user_id: str
    device_id: str
    access_token: str


def register(server: Synapse, localpart: str, *, admin: bool = False) -> Registered:
    """A person's account on ``server`` (shared-secret registration)."""
    from hyperhive.matrix.admin import registration_mac

    path = f"{server.url}/_synapse/admin/v1/register"
    nonce = httpx.get(path, timeout=10).json()["nonce"]
    password = secrets.token_hex(8)
    got = httpx.post(
        path,
        json={
            "nonce": nonce,
            "username": localpart,
            "password": password,
            "admin": admin,
            "mac": registration_mac(server.shared_secret, nonce, localpart, password, admin),
        },
        timeout=10,
    )
    got.raise_for_status()
    body = got.json()
    return Registered(body["user_id"], body["device_id"], body["access_token"])


class Person:
    """Someone at a Matrix client (matrix-nio), talking to agents through the homeserver."""

    def __init__(self, server: Synapse, account: Registered) -> None:
        from nio import AsyncClient

        self.user_id = account.user_id
        self.client = AsyncClient(server.url, account.user_id)
        self.client.restore_login(account.user_id, account.device_id, account.access_token)
        self._since: str | None = None

    async def close(self) -> None:
        await self.client.close()

    async def dm(self, other: str) -> str:
        from nio import RoomCreateResponse

        resp = await self.client.room_create(is_direct=True, invite=[other])
        assert isinstance(resp, RoomCreateResponse), resp
        return str(resp.room_id)

    async def room(self, invite: list[str], name: str) -> str:
        from nio import RoomCreateResponse

        resp = await self.client.room_create(name=name, invite=invite)
        assert isinstance(resp, RoomCreateResponse), resp
        return str(resp.room_id)

    async def invite(self, room_id: str, user: str) -> None:
        from nio import RoomInviteResponse

        resp = await self.client.room_invite(room_id, user)
        assert isinstance(resp, RoomInviteResponse), resp

    async def room_version(self, room_id: str) -> str:
        """The version ``room_id`` was made in (its create event's)."""
        from nio import RoomGetStateEventResponse

        resp = await self.client.room_get_state_event(room_id, "m.room.create")
        assert isinstance(resp, RoomGetStateEventResponse), resp
        return str(resp.content.get("room_version", "1"))

    async def default_room_version(self) -> str:
        """The version the homeserver makes rooms in when none is asked for."""
        async with httpx.AsyncClient() as http:
            got = await http.get(
                f"{self.client.homeserver}/_matrix/client/v3/capabilities",
                headers={"Authorization": f"Bearer {self.client.access_token}"},
            )
        got.raise_for_status()
        return str(got.json()["capabilities"]["m.room_versions"]["default"])

    async def say(self, room_id: str, text: str) -> None:
        from nio import RoomSendResponse

        content = {"msgtype": "m.text", "body": text}
        resp = await self.client.room_send(room_id, "m.room.message", content)
        assert isinstance(resp, RoomSendResponse), resp

    async def members(self, room_id: str) -> dict[str, str]:
        """``{user: membership}`` of ``room_id`` (join, invite, leave)."""
        from nio import RoomGetStateResponse

        resp = await self.client.room_get_state(room_id)
        assert isinstance(resp, RoomGetStateResponse), resp
        return {
            e["state_key"]: e["content"].get("membership", "")
            for e in resp.events
            if e.get("type") == "m.room.member"
        }

    async def texts(self, timeout_ms: int = 1000) -> list[tuple[str, str, str]]:
        """New text messages from others since the last call: (room, sender, body)."""
        from nio import RoomMessageText, SyncResponse

        resp = await self.client.sync(timeout=timeout_ms, since=self._since)
        assert isinstance(resp, SyncResponse), resp
        first, self._since = self._since is None, resp.next_batch
        return [
            (room_id, e.sender, e.body)
            for room_id, info in resp.rooms.join.items()
            for e in info.timeline.events
            if isinstance(e, RoomMessageText) and e.sender != self.user_id and not first
        ]
