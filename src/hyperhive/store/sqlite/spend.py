"""Spend, run-time budget overrides and sent notices on SQLite (semantics: ``base.SpendRepo``)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import astuple

from hyperhive.runcost import Figures, run_cost
from hyperhive.store.base import SpendRepo
from hyperhive.store.rows import SpendEntry, SpendPoint, SpendRun, SpendTotal
from hyperhive.store.sqlite.engine import Engine, Tx

__all__ = ["SqliteSpend"]

_COLS = (
    "agent, key, kind, at, cost_usd, input_tokens, output_tokens, "
    "cache_read_tokens, cache_creation_tokens, session_id, session_usd"
)
_TOKENS = "input_tokens + output_tokens + cache_read_tokens + cache_creation_tokens"
_FIGURES = "cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens"


def _session(tx: Tx, agent: str, session_id: str) -> dict[str, Figures]:
    rows = tx.all(
        f"SELECT model, {_FIGURES} FROM spend_sessions WHERE agent = ? AND session_id = ?",
        (agent, session_id),
    )
    return {r[0]: Figures(*tuple(r)[1:]) for r in rows}


class SqliteSpend(SpendRepo):
    def __init__(self, engine: Engine) -> None:
        self._db = engine

    async def record(self, run: SpendRun) -> tuple[SpendEntry, bool]:
        def op(tx: Tx) -> tuple[SpendEntry, bool]:
            known = tx.one(
                f"SELECT {_COLS} FROM spend WHERE agent = ? AND key = ?", (run.agent, run.key)
            )
            if known is not None:
                return SpendEntry(*tuple(known)), False
            sid = run.session_id
            cost = run_cost(_session(tx, run.agent, sid) if sid else {}, run.session_totals)
            entry = run.entry(cost.own)
            tx.execute(
                f"INSERT INTO spend({_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                astuple(entry),
            )
            if sid and run.session_totals:
                tx.execute(
                    "DELETE FROM spend_sessions WHERE agent = ? AND session_id = ?",
                    (run.agent, sid),
                )
                tx.conn.executemany(
                    f"INSERT INTO spend_sessions(agent, session_id, model, {_FIGURES}, at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(run.agent, sid, m, *astuple(f), run.at) for m, f in cost.totals.items()],
                )
            return entry, True

        return await self._db.run(op)

    async def session_totals(self, agent: str, session_id: str | None) -> dict[str, Figures]:
        if not session_id:
            return {}
        return await self._db.run(lambda tx: _session(tx, agent, session_id), durable=False)

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
