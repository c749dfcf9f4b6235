"""What the link code needs of a byte stream: a unix stream, or a WebSocket adapted to one.

The host link and the RPC client speak JSON lines over any ``ByteStream``, so
the network link (``hyperhive.netlink``) reuses them unchanged.
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, Self

__all__ = ["ByteStream"]


class ByteStream(Protocol):
    """anyio's stream semantics: ``EndOfStream``/``BrokenResourceError`` when it ends."""

    async def receive(self, max_bytes: int = 65536) -> bytes: ...

    async def send(self, data: bytes) -> None: ...

    async def aclose(self) -> None: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
