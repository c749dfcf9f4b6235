"""Unix-socket streams over asyncio transports, with anyio's stream semantics.

Why not ``anyio.connect_unix``/``create_unix_listener``: on the asyncio
backend (4.16) their raw-socket streams race a cancelled ``receive`` against
the selector's reader callback (``Future.set_result`` on a cancelled future →
``InvalidStateError`` in the loop), which every cancelled long-poll can hit
(agronholm/anyio#1267 fixed the ``aclose`` half only). Transport-based
streams do not have that race. The API mirrors anyio's so callers read the
same: ``receive``/``send``/``aclose``, ``EndOfStream`` and
``BrokenResourceError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import TracebackType

import anyio
from anyio.abc import TaskStatus

__all__ = ["UnixStream", "connect_unix", "is_listening", "listening_socket", "serve_unix_streams"]


class UnixStream:
    """One connected unix stream."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            data = await self._reader.read(max_bytes)
        except (ConnectionError, OSError) as exc:
            raise anyio.BrokenResourceError from exc
        if not data:
            raise anyio.EndOfStream
        return data

    async def send(self, data: bytes) -> None:
        if self._writer.is_closing():
            raise anyio.ClosedResourceError
        try:
            self._writer.write(data)
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        self._writer.close()
        with contextlib.suppress(ConnectionError, OSError, asyncio.CancelledError):
            with anyio.CancelScope(shield=True):
                await self._writer.wait_closed()

    async def __aenter__(self) -> UnixStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


async def connect_unix(path: Path) -> UnixStream:
    reader, writer = await asyncio.open_unix_connection(str(path), limit=1 << 16)
    return UnixStream(reader, writer)


async def serve_unix_streams(
    path: Path,
    handler: Callable[[UnixStream], Coroutine[object, object, None]],
    *,
    mode: int = 0o600,
    owner: tuple[int, int] | None = None,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on ``path`` until cancelled; each connection runs ``handler`` in our task group."""
    sock, made = listening_socket(path, mode, owner)
    try:
        async with anyio.create_task_group() as tg:

            def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                tg.start_soon(handler, UnixStream(reader, writer))

            server = await asyncio.start_unix_server(accepted, sock=sock, limit=1 << 16)
            try:
                task_status.started()
                await anyio.sleep_forever()
            finally:
                server.close()
    finally:
        # On every way out (cancelled mid-start too): nothing listens on it any more.
        unlink_if(path, made)
        sock.close()


def listening_socket(
    path: Path, mode: int, owner: tuple[int, int] | None
) -> tuple[socket.socket, SocketFile]:
    """A listening unix socket at ``path`` (a stale file replaced), and which socket file
    it made (for :func:`unlink_if`).

    The mode is set between ``bind`` and ``listen``: nobody can connect before
    the socket file has its final permissions.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    made: SocketFile | None = None
    try:
        sock.bind(str(path))
        made = _identity(path)
        os.chmod(path, mode)
        if owner is not None:
            os.chown(path, *owner)
        made = _identity(path)  # its final change time: what a successor cannot share
        sock.listen(256)
    except BaseException:
        if made is not None:
            unlink_if(path, made)
        sock.close()
        raise
    return sock, made


# A socket file as bound: (inode, change time in ns). The inode alone is not enough: a
# successor bound on the same path right after the file was removed can get the same
# inode number back (ext4 reuses them), and its predecessor's cleanup would remove it.
SocketFile = tuple[int, int]


def _identity(path: Path) -> SocketFile:
    st = os.stat(path)
    return st.st_ino, st.st_ctime_ns


def unlink_if(path: Path, made: SocketFile) -> None:
    """Remove ``path`` if it is still the socket file we bound (a successor listening
    on the same path, an agent's socket reopened, keeps its own)."""
    with contextlib.suppress(FileNotFoundError):
        if _identity(path) == made:
            path.unlink(missing_ok=True)


def is_listening(path: Path) -> bool:
    """Whether something accepts connections on ``path`` (a stale socket file does not)."""
    with socket.socket(socket.AF_UNIX) as sock:
        try:
            sock.connect(str(path))
        except OSError:
            return False
        return True
