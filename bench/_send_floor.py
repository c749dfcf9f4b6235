"""The least Python a durable group-commit send server can be: the floor under a send.

Run as ``python -m bench._send_floor DB SOCKET...``; it serves until killed.
It speaks the hive's wire to the same clients (a JSON line in, ``Sent`` out)
and does the same durable work as ``hivectl serve`` (one row in ``hive.db``'s
``messages`` per send, WAL, ``synchronous=FULL``, group commit on one writer
thread, the reply only after the commit), and nothing else: no validation,
no identity, no routing, no tasks or futures per request, one hand-over to
the writer per loop iteration. Its CPU per send is what any Python server
on this machine and disk pays; the hive's is judged against it.
"""

from __future__ import annotations

import asyncio
import json
import queue
import sqlite3
import sys
import threading
import time
from pathlib import Path

import uvloop

from bench._procs import open_raw

_INSERT = "INSERT INTO messages(sender, recipient, body, created_at) VALUES ('s', ?, ?, ?)"
# (connection, request id, recipient, body)
_Job = tuple[asyncio.Transport, int, str, str]


class _Server:
    def __init__(self, db: Path, loop: asyncio.AbstractEventLoop) -> None:
        open_raw(db).close()  # the hive's schema, migrated
        self._conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._loop = loop
        self._jobs: queue.SimpleQueue[list[_Job]] = queue.SimpleQueue()
        self._pending: list[_Job] | None = None
        threading.Thread(target=self._writer, daemon=True).start()

    def take(self, transport: asyncio.Transport, line: bytes) -> None:
        request = json.loads(line)
        if self._pending is None:
            self._pending = []
            self._loop.call_soon(self._flush)
        self._pending.append((transport, request["id"], request["to"], request["body"]))

    def _flush(self) -> None:
        jobs, self._pending = self._pending, None
        if jobs:
            self._jobs.put(jobs)

    def _writer(self) -> None:
        conn = self._conn
        while True:
            batch = self._jobs.get()
            while True:
                try:
                    batch += self._jobs.get_nowait()
                except queue.Empty:
                    break
            conn.execute("BEGIN IMMEDIATE")
            now = time.time()
            ids = [conn.execute(_INSERT, (to, body, now)).lastrowid for _, _, to, body in batch]
            conn.execute("COMMIT")
            self._loop.call_soon_threadsafe(_reply, batch, ids)


def _reply(batch: list[_Job], ids: list[int | None]) -> None:
    for (transport, rid, to, _), msg_id in zip(batch, ids, strict=True):
        transport.write(
            b'{"id":%d,"ok":true,"result":{"id":%d,"to":%s},"error":null}\n'
            % (rid, msg_id or 0, json.dumps(to).encode())
        )


class _Connection(asyncio.Protocol):
    def __init__(self, server: _Server) -> None:
        self._server = server
        self._rest = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # uvloop's is not an asyncio.Transport subclass

    def data_received(self, data: bytes) -> None:
        *lines, self._rest = (self._rest + data).split(b"\n")
        for line in lines:
            self._server.take(self._transport, line)  # type: ignore[arg-type]


async def _serve(db: Path, sockets: list[Path]) -> None:
    loop = asyncio.get_running_loop()
    server = _Server(db, loop)
    for path in sockets:
        await loop.create_unix_server(lambda: _Connection(server), path=str(path))
    await asyncio.Event().wait()


def main(argv: list[str]) -> None:
    db, *sockets = argv
    uvloop.run(_serve(Path(db), [Path(s) for s in sockets]))


if __name__ == "__main__":
    main(sys.argv[1:])
