"""A WebSocket seen as a JSON-lines byte stream, so the host link and RPC client run on it.

One WebSocket message carries one frame (no newline); ``receive`` hands it
back newline-terminated, so ``FrameDecoder`` reads it exactly as it reads a
unix socket. WebSocket's own ``max_size`` caps a message before it is
buffered.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

import anyio
from websockets.asyncio.connection import Connection
from websockets.exceptions import ConnectionClosed, ConnectionClosedOK

__all__ = ["ENVELOPE_BYTES", "HOST_HEADER", "LINK_PATH", "WsStream"]

# The handshake header naming the host (believed only with its credential).
HOST_HEADER = "Hyperhive-Host"
LINK_PATH = "/hostlink"
# Room for a forwarded frame's envelope around an agent's largest frame.
ENVELOPE_BYTES = 64 << 10


class WsStream:
    def __init__(self, ws: Connection) -> None:
        self.ws = ws

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            message = await self.ws.recv()
        except ConnectionClosedOK as exc:
            raise anyio.EndOfStream from exc
        except ConnectionClosed as exc:
            raise anyio.BrokenResourceError from exc
        data = message.encode() if isinstance(message, str) else message
        return data + b"\n"

    async def send(self, data: bytes) -> None:
        try:
            for line in data.split(b"\n"):
                if line.strip():
                    await self.ws.send(line.decode())
        except ConnectionClosed as exc:
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await self.ws.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
