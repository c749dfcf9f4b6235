"""Spend, run-time budget overrides and sent notices on SQLite (semantics: ``base.SpendRepo``)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

from hyperhive.store.base import SpendRepo
from hyperhive.store.rows import SpendEntry, SpendPoint, SpendTotal
from hyperhive.store.sqlite.engine import Engine, Tx

__all__ = ["SqliteSpend"]

_COLS = (
    "agent, key, kind, at, cost_usd, input_tokens, output_tokens, "
    "cache_read_tokens, cache_creation_tokens"
)
_TOKENS = "input_tokens + output_tokens + cache_read_tokens + cache_creation_tokens"


class SqliteSpend(SpendRepo):
    def __init__(self, engine: Engine) -> None:
        self._db = engine

    async def record(self, entry: SpendEntry) -> bool:
        def op(tx: Tx) -> bool:
            cur = tx.execute(
                f"INSERT OR IGNORE INTO spend({_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    entry.agent,
                    entry.key,
                    entry.kind,
                    entry.at,
                    entry.cost_usd,
                    entry.input_tokens,
                    entry.output_tokens,
                    entry.cache_read_tokens,
                    entry.cache_creation_tokens,
                ),
            )
            return cur.rowcount > 0

        return await self._db.run(op)

    async def totals(self, since: float | None = None) -> dict[str, SpendTotal]:
        rows = await self._db.run(
            lambda tx: tx.all(
                f"SELECT agent, SUM(cost_usd), SUM({_TOKENS}), COUNT(*) FROM spend "
                "WHERE at >= ? GROUP BY agent ORDER BY agent",
                (float("-inf") if since is None else since,),
            ),
            durable=False,
        )
        return {r[0]: SpendTotal(r[0], float(r[1]), int(r[2]), int(r[3])) for r in rows}

    async def series(self, since: float, origin: float, bucket: float) -> list[SpendPoint]:
        rows = await self._db.run(
            lambda tx: tx.all(
                "SELECT agent, CAST((at - ?) / ? AS INTEGER) AS n, "
                f"SUM(cost_usd), SUM({_TOKENS}) FROM spend WHERE at >= ? "
                "GROUP BY n, agent ORDER BY n, agent",
                (origin, bucket, since),
            ),
            durable=False,
        )
        return [SpendPoint(r[0], origin + r[1] * bucket, float(r[2]), int(r[3])) for r in rows]

    async def entries(self, agent: str | None = None, limit: int = 100) -> list[SpendEntry]:
        where, params = ("WHERE agent = ?", (agent, limit)) if agent else ("", (limit,))
        rows = await self._db.run(
            lambda tx: tx.all(
                f"SELECT {_COLS} FROM spend {where} ORDER BY id DESC LIMIT ?", params
            ),
            durable=False,
        )
        return [SpendEntry(*tuple(r)) for r in rows]

    async def overrides(self) -> dict[str, dict[str, float | None]]:
        rows = await self._db.run(
            lambda tx: tx.all("SELECT scope, limits FROM budget_overrides ORDER BY scope"),
            durable=False,
        )
        return {r[0]: json.loads(r[1]) for r in rows}

    async def set_overrides(self, scope: str, limits: Mapping[str, float | None]) -> None:
        def op(tx: Tx) -> None:
            if not limits:
                tx.execute("DELETE FROM budget_overrides WHERE scope = ?", (scope,))
                return
            tx.execute(
                "INSERT INTO budget_overrides(scope, limits, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (scope) DO UPDATE SET limits = excluded.limits, "
                "updated_at = excluded.updated_at",
                (scope, json.dumps(dict(limits), sort_keys=True), time.time()),
            )

        await self._db.run(op)

    async def mark_notice(self, scope: str, marker: str) -> bool:
        return await self._db.run(
            lambda tx: (
                tx.execute(
                    "INSERT OR IGNORE INTO budget_notices(scope, marker, at) VALUES (?, ?, ?)",
                    (scope, marker, time.time()),
                ).rowcount
                > 0
            )
        )
