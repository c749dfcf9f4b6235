"""The hive's own values on SQLite (semantics: ``base.SettingsRepo``)."""

from __future__ import annotations

import time

from hyperhive.store.base import SettingsRepo
from hyperhive.store.sqlite.engine import Engine, Tx

__all__ = ["SqliteSettings"]


class SqliteSettings(SettingsRepo):
    def __init__(self, engine: Engine) -> None:
        self._db = engine

    async def get(self, key: str) -> str | None:
        row = await self._db.run(
            lambda tx: tx.one("SELECT value FROM hive_settings WHERE key = ?", (key,))
        )
        return None if row is None else str(row["value"])

    async def keep(self, key: str, value: str) -> str:
        def op(tx: Tx) -> str:
            tx.execute(
                "INSERT INTO hive_settings(key, value, set_at) VALUES (?, ?, ?) "
                "ON CONFLICT (key) DO NOTHING",
                (key, value, time.time()),
            )
            row = tx.one("SELECT value FROM hive_settings WHERE key = ?", (key,))
            assert row is not None
            return str(row["value"])

        return await self._db.run(op)
