"""The hive's own values on PostgreSQL (semantics: ``base.SettingsRepo``)."""

from __future__ import annotations

from hyperhive.store.base import SettingsRepo
from hyperhive.store.postgres._repo import Conn, PgRepo, now

__all__ = ["PgSettings"]


class PgSettings(PgRepo, SettingsRepo):
    async def get(self, key: str) -> str | None:
        rows = await self._read("SELECT value FROM hive_settings WHERE key = %s", (key,))
        return str(rows[0][0]) if rows else None

    async def keep(self, key: str, value: str) -> str:
        async def op(conn: Conn) -> str:
            await conn.execute(
                "INSERT INTO hive_settings(key, value, set_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (key) DO NOTHING",
                (key, value, now()),
            )
            cur = await conn.execute("SELECT value FROM hive_settings WHERE key = %s", (key,))
            row = await cur.fetchone()
            assert row is not None
            return str(row[0])

        return await self._tx(op)
