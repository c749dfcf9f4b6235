"""Pending trash of destroyed agents on absent hosts, on PostgreSQL (semantics:
``base.TrashRepo``)."""

from __future__ import annotations

from typing import Any

from hyperhive.store.base import TrashRepo
from hyperhive.store.postgres._repo import Conn, PgRepo, now
from hyperhive.store.rows import PendingTrash

__all__ = ["PgTrash"]

_COLS = "agent, host, destroyed_at"


def _row(row: tuple[Any, ...]) -> PendingTrash:
    return PendingTrash(*row)


class PgTrash(PgRepo, TrashRepo):
    async def add(self, agent: str, host: str) -> PendingTrash:
        async def op(conn: Conn) -> PendingTrash:
            cur = await conn.execute(
                "INSERT INTO pending_trash(agent, host, destroyed_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (agent) DO UPDATE SET host = excluded.host, "
                f"destroyed_at = excluded.destroyed_at RETURNING {_COLS}",
                (agent, host, now()),
            )
            row = await cur.fetchone()
            assert row is not None
            return _row(row)

        return await self._tx(op)

    async def get(self, agent: str) -> PendingTrash | None:
        rows = await self._read(f"SELECT {_COLS} FROM pending_trash WHERE agent = %s", (agent,))
        return _row(rows[0]) if rows else None

    async def all(self) -> list[PendingTrash]:
        rows = await self._read(f"SELECT {_COLS} FROM pending_trash ORDER BY destroyed_at, agent")
        return [_row(r) for r in rows]

    async def done(self, agent: str) -> None:
        async def op(conn: Conn) -> None:
            await conn.execute("DELETE FROM pending_trash WHERE agent = %s", (agent,))

        await self._tx(op)
