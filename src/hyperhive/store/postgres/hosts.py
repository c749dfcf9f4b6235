"""Remote agent hosts' credential records on PostgreSQL (semantics: ``base.HostRepo``)."""

from __future__ import annotations

from hyperhive.store.base import HostRepo, host_missing, host_taken
from hyperhive.store.postgres._repo import Conn, PgRepo, now
from hyperhive.store.rows import HostRow

__all__ = ["PgHosts"]

_COLS = (
    "name, secret_hash, created_at, rotated_at, revoked_at, last_seen_at, epoch, "
    "lease_expires_at, heartbeat_at, capacity, expires_at, lost_epoch"
)


class PgHosts(PgRepo, HostRepo):
    async def add(self, name: str, secret_hash: str, expires_at: float | None = None) -> HostRow:
        async def op(conn: Conn) -> HostRow:
            cur = await conn.execute(
                "INSERT INTO hosts(name, secret_hash, created_at, expires_at) "
                "VALUES (%s, %s, %s, %s) "
                f"ON CONFLICT (name) DO NOTHING RETURNING {_COLS}",
                (name, secret_hash, now(), expires_at),
            )
            row = await cur.fetchone()
            if row is None:
                raise host_taken(name)
            return HostRow(*row)

        return await self._tx(op)

    async def get(self, name: str) -> HostRow | None:
        rows = await self._read(f"SELECT {_COLS} FROM hosts WHERE name = %s", (name,))
        return HostRow(*rows[0]) if rows else None

    async def list(self) -> list[HostRow]:
        return [HostRow(*r) for r in await self._read(f"SELECT {_COLS} FROM hosts ORDER BY name")]

    async def _update(self, name: str, sql: str, params: tuple[object, ...]) -> HostRow:
        async def op(conn: Conn) -> HostRow:
            cur = await conn.execute(
                f"UPDATE hosts SET {sql} WHERE name = %s RETURNING {_COLS}", (*params, name)
            )
            row = await cur.fetchone()
            if row is None:
                raise host_missing(name)
            return HostRow(*row)

        return await self._tx(op)

    async def rotate(self, name: str, secret_hash: str, expires_at: float | None = None) -> HostRow:
        return await self._update(
            name,
            "secret_hash = %s, rotated_at = %s, revoked_at = NULL, expires_at = %s",
            (secret_hash, now(), expires_at),
        )

    async def revoke(self, name: str) -> HostRow:
        return await self._update(name, "revoked_at = %s", (now(),))

    async def seen(self, name: str, at: float) -> None:
        async def op(conn: Conn) -> None:
            await conn.execute("UPDATE hosts SET last_seen_at = %s WHERE name = %s", (at, name))

        await self._tx(op)

    async def new_epoch(self, name: str, expires_at: float) -> int:
        async def op(conn: Conn) -> int:
            cur = await conn.execute(
                "UPDATE hosts SET epoch = epoch + 1, lease_expires_at = %s WHERE name = %s "
                "RETURNING epoch",
                (expires_at, name),
            )
            row = await cur.fetchone()
            if row is None:
                raise host_missing(name)
            return int(row[0])

        return await self._tx(op)

    async def renew(
        self, name: str, epoch: int, at: float, expires_at: float, capacity: str
    ) -> bool:
        async def op(conn: Conn) -> bool:
            cur = await conn.execute(
                "UPDATE hosts SET lease_expires_at = %s, heartbeat_at = %s, capacity = %s "
                "WHERE name = %s AND epoch = %s RETURNING epoch",
                (expires_at, at, capacity, name, epoch),
            )
            return await cur.fetchone() is not None

        return await self._tx(op)

    async def claim_loss(self, name: str, epoch: int) -> bool:
        async def op(conn: Conn) -> bool:
            cur = await conn.execute(
                "UPDATE hosts SET lost_epoch = epoch WHERE name = %s AND epoch = %s "
                "AND (lost_epoch IS NULL OR lost_epoch <> epoch) RETURNING name",
                (name, epoch),
            )
            return await cur.fetchone() is not None

        return await self._tx(op)
