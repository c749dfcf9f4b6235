"""Pending trash of destroyed agents on absent hosts, on SQLite (semantics: ``base.TrashRepo``)."""

from __future__ import annotations

import sqlite3
import time

from hyperhive.store.base import TrashRepo
from hyperhive.store.rows import PendingTrash
from hyperhive.store.sqlite.engine import Engine, Tx

__all__ = ["SqliteTrash"]


def _row(r: sqlite3.Row) -> PendingTrash:
    return PendingTrash(agent=r["agent"], host=r["host"], destroyed_at=r["destroyed_at"])


class SqliteTrash(TrashRepo):
    def __init__(self, engine: Engine) -> None:
        self._db = engine

    async def add(self, agent: str, host: str) -> PendingTrash:
        def op(tx: Tx) -> PendingTrash:
            row = tx.one(
                "INSERT INTO pending_trash(agent, host, destroyed_at) VALUES (?, ?, ?) "
                "ON CONFLICT (agent) DO UPDATE SET host = excluded.host, "
                "destroyed_at = excluded.destroyed_at RETURNING *",
                (agent, host, time.time()),
            )
            assert row is not None
            return _row(row)

        return await self._db.run(op)

    async def get(self, agent: str) -> PendingTrash | None:
        row = await self._db.run(
            lambda tx: tx.one("SELECT * FROM pending_trash WHERE agent = ?", (agent,)),
            durable=False,
        )
        return None if row is None else _row(row)

    async def all(self) -> list[PendingTrash]:
        rows = await self._db.run(
            lambda tx: tx.all("SELECT * FROM pending_trash ORDER BY destroyed_at, agent"),
            durable=False,
        )
        return [_row(r) for r in rows]

    async def done(self, agent: str) -> None:
        await self._db.run(
            lambda tx: tx.execute("DELETE FROM pending_trash WHERE agent = ?", (agent,))
        )
