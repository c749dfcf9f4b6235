"""A bare anyio unix-socket echo server: the floor under any socket round trip.

Run as ``python -m bench._echo PATH [DB]``; it echoes every chunk back until
killed. With ``DB`` (a SQLite file set up like ``hive.db``: WAL,
``synchronous=FULL``) it first inserts one row per chunk in its own
transaction: the floor under a durable round trip (one fsync on the path).
"""

from __future__ import annotations

import sqlite3
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from anyio.abc import SocketStream

_INSERT = "INSERT INTO messages(sender, recipient, body, created_at) VALUES ('b', 'a', ?, ?)"


def _handler(db: sqlite3.Connection | None) -> Callable[[SocketStream], Awaitable[None]]:
    async def echo(stream: SocketStream) -> None:
        async with stream:
            try:
                while True:
                    chunk = await stream.receive(65536)
                    if db is not None:  # autocommit: the INSERT is its own transaction
                        db.execute(_INSERT, (chunk.decode(errors="replace"), time.time()))
                    await stream.send(chunk)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return

    return echo


async def _serve(path: Path, db: sqlite3.Connection | None) -> None:
    listener = await anyio.create_unix_listener(path)
    async with listener:
        await listener.serve(_handler(db))


if __name__ == "__main__":
    conn = None
    if len(sys.argv) > 2:
        from bench._procs import open_raw

        conn = open_raw(Path(sys.argv[2]))
    anyio.run(_serve, Path(sys.argv[1]), conn)
