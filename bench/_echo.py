"""A bare anyio unix-socket echo server: the floor under any socket round trip.

Run as ``python -m bench._echo PATH``; it echoes every chunk back until killed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
from anyio.abc import SocketStream


async def _echo(stream: SocketStream) -> None:
    async with stream:
        try:
            while True:
                await stream.send(await stream.receive(65536))
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return


async def _serve(path: Path) -> None:
    listener = await anyio.create_unix_listener(path)
    async with listener:
        await listener.serve(_echo)


if __name__ == "__main__":
    anyio.run(_serve, Path(sys.argv[1]))
