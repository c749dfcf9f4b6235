"""Remote agent hosts' credential records on PostgreSQL (semantics: ``base.HostRepo``)."""

from __future__ import annotations

from hyperhive.store.base import HostRepo, host_missing, host_taken
from hyperhive.store.postgres._repo import Conn, PgRepo, now
from hyperhive.store.rows import HostRow

__all__ = ["PgHosts"]

_COLS = "name, secret_hash, created_at, rotated_at, revoked_at, last_seen_at"


class PgHosts(PgRepo, HostRepo):
    async def add(self, name: str, secret_hash: str) -> HostRow:
        async def op(conn: Conn) -> HostRow:
            cur = await conn.execute(
                "INSERT INTO hosts(name, secret_hash, created_at) VALUES (%s, %s, %s) "
                f"ON CONFLICT (name) DO NOTHING RETURNING {_COLS}",
                (name, secret_hash, now()),
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

    async def rotate(self, name: str, secret_hash: str) -> HostRow:
        return await self._update(
            name, "secret_hash = %s, rotated_at = %s, revoked_at = NULL", (secret_hash, now())
        )

    async def revoke(self, name: str) -> HostRow:
        return await self._update(name, "revoked_at = %s", (now(),))

    async def seen(self, name: str, at: float) -> None:
        async def op(conn: Conn) -> None:
            await conn.execute("UPDATE hosts SET last_seen_at = %s WHERE name = %s", (at, name))

        await self._tx(op)
