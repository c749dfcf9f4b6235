"""Agents' last snapshots on PostgreSQL (semantics: ``base.SnapshotRepo``)."""

from __future__ import annotations

from typing import Any

from hyperhive.store.base import SnapshotRepo
from hyperhive.store.postgres._repo import Conn, PgRepo
from hyperhive.store.rows import SnapshotHead, StoredSnapshot

__all__ = ["PgSnapshots"]

_HEAD = "agent, host, taken_at, sha256, size, raw_bytes, files"


def _head(row: tuple[Any, ...]) -> SnapshotHead:
    return SnapshotHead(*row[:7])


class PgSnapshots(PgRepo, SnapshotRepo):
    async def put(self, snapshot: StoredSnapshot) -> None:
        h = snapshot.head

        async def op(conn: Conn) -> None:
            await conn.execute(
                f"INSERT INTO agent_snapshots({_HEAD}, data) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
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

        await self._tx(op)

    async def head(self, agent: str) -> SnapshotHead | None:
        rows = await self._read(f"SELECT {_HEAD} FROM agent_snapshots WHERE agent = %s", (agent,))
        return _head(rows[0]) if rows else None

    async def get(self, agent: str) -> StoredSnapshot | None:
        rows = await self._read(
            f"SELECT {_HEAD}, data FROM agent_snapshots WHERE agent = %s", (agent,)
        )
        return StoredSnapshot(_head(rows[0]), bytes(rows[0][7])) if rows else None

    async def forget(self, agent: str) -> None:
        async def op(conn: Conn) -> None:
            await conn.execute("DELETE FROM agent_snapshots WHERE agent = %s", (agent,))

        await self._tx(op)
