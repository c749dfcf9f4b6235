"""Remote agent hosts' credential records on SQLite."""

from __future__ import annotations

import time

from hyperhive.store.base import HostRepo, host_missing, host_taken
from hyperhive.store.rows import HostRow
from hyperhive.store.sqlite import rowmap
from hyperhive.store.sqlite.engine import Engine, Tx

__all__ = ["SqliteHosts"]


class SqliteHosts(HostRepo):
    def __init__(self, engine: Engine) -> None:
        self._db = engine

    async def add(self, name: str, secret_hash: str, expires_at: float | None = None) -> HostRow:
        def op(tx: Tx) -> HostRow:
            row = tx.one(
                "INSERT INTO hosts(name, secret_hash, created_at, expires_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (name) DO NOTHING RETURNING *",
                (name, secret_hash, time.time(), expires_at),
            )
            if row is None:
                raise host_taken(name)
            return rowmap.from_row(HostRow, row)

        return await self._db.run(op)

    async def get(self, name: str) -> HostRow | None:
        row = await self._db.run(
            lambda tx: tx.one("SELECT * FROM hosts WHERE name = ?", (name,)), durable=False
        )
        return None if row is None else rowmap.from_row(HostRow, row)

    async def list(self) -> list[HostRow]:
        rows = await self._db.run(
            lambda tx: tx.all("SELECT * FROM hosts ORDER BY name"), durable=False
        )
        return [rowmap.from_row(HostRow, r) for r in rows]

    async def _update(self, name: str, sql: str, params: tuple[object, ...]) -> HostRow:
        def op(tx: Tx) -> HostRow:
            row = tx.one(f"UPDATE hosts SET {sql} WHERE name = ? RETURNING *", (*params, name))
            if row is None:
                raise host_missing(name)
            return rowmap.from_row(HostRow, row)

        return await self._db.run(op)

    async def rotate(self, name: str, secret_hash: str, expires_at: float | None = None) -> HostRow:
        return await self._update(
            name,
            "secret_hash = ?, rotated_at = ?, revoked_at = NULL, expires_at = ?",
            (secret_hash, time.time(), expires_at),
        )

    async def revoke(self, name: str) -> HostRow:
        return await self._update(name, "revoked_at = ?", (time.time(),))

    async def seen(self, name: str, at: float) -> None:
        await self._db.run(
            lambda tx: tx.execute("UPDATE hosts SET last_seen_at = ? WHERE name = ?", (at, name))
        )

    async def new_epoch(self, name: str, expires_at: float) -> int:
        def op(tx: Tx) -> int:
            row = tx.one(
                "UPDATE hosts SET epoch = epoch + 1, lease_expires_at = ? WHERE name = ? "
                "RETURNING epoch",
                (expires_at, name),
            )
            if row is None:
                raise host_missing(name)
            return int(row["epoch"])

        return await self._db.run(op)

    async def renew(
        self, name: str, epoch: int, at: float, expires_at: float, capacity: str
    ) -> bool:
        def op(tx: Tx) -> bool:
            row = tx.one(
                "UPDATE hosts SET lease_expires_at = ?, heartbeat_at = ?, capacity = ? "
                "WHERE name = ? AND epoch = ? RETURNING epoch",
                (expires_at, at, capacity, name, epoch),
            )
            return row is not None

        # A lost heartbeat on a crash costs nothing: the next one comes in seconds.
        return await self._db.run(op, durable=False)

    async def claim_loss(self, name: str, epoch: int) -> bool:
        def op(tx: Tx) -> bool:
            row = tx.one(
                "UPDATE hosts SET lost_epoch = epoch WHERE name = ? AND epoch = ? "
                "AND (lost_epoch IS NULL OR lost_epoch <> epoch) RETURNING name",
                (name, epoch),
            )
            return row is not None

        return await self._db.run(op)
