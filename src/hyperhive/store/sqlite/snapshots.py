"""Agents' last snapshots on SQLite (semantics: ``base.SnapshotRepo``)."""

from __future__ import annotations

import sqlite3

from hyperhive.store.base import SnapshotRepo
from hyperhive.store.rows import SnapshotHead, StoredSnapshot
from hyperhive.store.sqlite.engine import Engine, Tx

__all__ = ["SqliteSnapshots"]

_HEAD = "agent, host, taken_at, sha256, size, raw_bytes, files"


def _head(r: sqlite3.Row) -> SnapshotHead:
    return SnapshotHead(
        agent=r["agent"],
        host=r["host"],
        taken_at=r["taken_at"],
        sha256=r["sha256"],
        size=r["size"],
        raw_bytes=r["raw_bytes"],
        files=r["files"],
    )


class SqliteSnapshots(SnapshotRepo):
    def __init__(self, engine: Engine) -> None:
        self._db = engine

    async def put(self, snapshot: StoredSnapshot) -> None:
        h = snapshot.head

        def op(tx: Tx) -> None:
            tx.execute(
                f"INSERT INTO agent_snapshots({_HEAD}, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (agent) DO UPDATE SET host = excluded.host, "
                "taken_at = excluded.taken_at, sha256 = excluded.sha256, size = excluded.size, "
                "raw_bytes = excluded.raw_bytes, files = excluded.files, data = excluded.data",
                (
                    h.agent,
                    h.host,
                    h.taken_at,
                    h.sha256,
                    h.size,
                    h.raw_bytes,
                    h.files,
                    snapshot.data,
                ),
            )

        await self._db.run(op)

    async def head(self, agent: str) -> SnapshotHead | None:
        row = await self._db.run(
            lambda tx: tx.one(f"SELECT {_HEAD} FROM agent_snapshots WHERE agent = ?", (agent,)),
            durable=False,
        )
        return None if row is None else _head(row)

    async def get(self, agent: str) -> StoredSnapshot | None:
        row = await self._db.run(
            lambda tx: tx.one(
                f"SELECT {_HEAD}, data FROM agent_snapshots WHERE agent = ?", (agent,)
            ),
            durable=False,
        )
        return None if row is None else StoredSnapshot(_head(row), bytes(row["data"]))

    async def forget(self, agent: str) -> None:
        await self._db.run(
            lambda tx: tx.execute("DELETE FROM agent_snapshots WHERE agent = ?", (agent,))
        )
