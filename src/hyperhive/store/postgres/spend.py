"""Spend, run-time budget overrides and sent notices on PostgreSQL (``base.SpendRepo``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import astuple

from hyperhive.runcost import Figures, run_cost
from hyperhive.store.base import SpendRepo
from hyperhive.store.postgres._repo import Conn, PgRepo, now
from hyperhive.store.rows import SpendEntry, SpendPoint, SpendRun, SpendTotal

__all__ = ["PgSpend"]

_COLS = (
    "agent, key, kind, at, cost_usd, input_tokens, output_tokens, "
    "cache_read_tokens, cache_creation_tokens, session_id, session_usd"
)
_TOKENS = "input_tokens + output_tokens + cache_read_tokens + cache_creation_tokens"
_FIGURES = "cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens"


async def _session(conn: Conn, agent: str, session_id: str) -> dict[str, Figures]:
    cur = await conn.execute(
        f"SELECT model, {_FIGURES} FROM spend_sessions WHERE agent = %s AND session_id = %s",
        (agent, session_id),
    )
    return {r[0]: Figures(float(r[1]), *(int(v) for v in r[2:])) for r in await cur.fetchall()}


async def _known(conn: Conn, agent: str, key: str) -> SpendEntry | None:
    cur = await conn.execute(
        f"SELECT {_COLS} FROM spend WHERE agent = %s AND key = %s", (agent, key)
    )
    row = await cur.fetchone()
    return SpendEntry(*row) if row is not None else None


class PgSpend(PgRepo, SpendRepo):
    async def record(self, run: SpendRun) -> tuple[SpendEntry, bool]:
        async def op(conn: Conn) -> tuple[SpendEntry, bool]:
            sid = run.session_id
            if sid:
                # One report of a session at a time: each is differenced against the last.
                await conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"spend:{run.agent}:{sid}",)
                )
            known = await _known(conn, run.agent, run.key)
            if known is not None:
                return known, False
            cost = run_cost(await _session(conn, run.agent, sid) if sid else {}, run.session_totals)
            entry = run.entry(cost.own)
            cur = await conn.execute(
                f"INSERT INTO spend({_COLS}) VALUES ({', '.join(['%s'] * 11)}) "
                "ON CONFLICT (agent, key) DO NOTHING",
                astuple(entry),
            )
            if cur.rowcount == 0:  # the same run, recorded by a concurrent report
                again = await _known(conn, run.agent, run.key)
                assert again is not None
                return again, False
            if sid and run.session_totals:
                await conn.execute(
                    "DELETE FROM spend_sessions WHERE agent = %s AND session_id = %s",
                    (run.agent, sid),
                )
                async with conn.cursor() as c:
                    await c.executemany(
                        f"INSERT INTO spend_sessions(agent, session_id, model, {_FIGURES}, at) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                        [(run.agent, sid, m, *astuple(f), run.at) for m, f in cost.totals.items()],
                    )
            return entry, True

        return await self._db.tx(op)

    async def session_totals(self, agent: str, session_id: str | None) -> dict[str, Figures]:
        if not session_id:
            return {}
        return await self._db.read(lambda conn: _session(conn, agent, session_id))

    async def totals(self, since: float | None = None) -> dict[str, SpendTotal]:
        rows = await self._read(
            f"SELECT agent, SUM(cost_usd), SUM({_TOKENS}), COUNT(*) FROM spend "
            "WHERE %s::float8 IS NULL OR at >= %s GROUP BY agent ORDER BY agent",
            (since, since),
        )
        return {r[0]: SpendTotal(r[0], float(r[1]), int(r[2]), int(r[3])) for r in rows}

    async def series(self, since: float, origin: float, bucket: float) -> list[SpendPoint]:
        rows = await self._read(
            "SELECT agent, floor((at - %(o)s) / %(b)s)::bigint AS n, "
            f"SUM(cost_usd), SUM({_TOKENS}) FROM spend WHERE at >= %(s)s "
            "GROUP BY n, agent ORDER BY n, agent",
            {"o": origin, "b": bucket, "s": since},
        )
        return [SpendPoint(r[0], origin + r[1] * bucket, float(r[2]), int(r[3])) for r in rows]

    async def entries(self, agent: str | None = None, limit: int = 100) -> list[SpendEntry]:
        if agent:
            rows = await self._read(
                f"SELECT {_COLS} FROM spend WHERE agent = %s ORDER BY id DESC LIMIT %s",
                (agent, limit),
            )
        else:
            rows = await self._read(
                f"SELECT {_COLS} FROM spend ORDER BY id DESC LIMIT %s", (limit,)
            )
        return [SpendEntry(*r) for r in rows]

    async def overrides(self) -> dict[str, dict[str, float | None]]:
        rows = await self._read("SELECT scope, limits FROM budget_overrides ORDER BY scope")
        return {r[0]: json.loads(r[1]) for r in rows}

    async def set_overrides(self, scope: str, limits: Mapping[str, float | None]) -> None:
        async def op(conn: Conn) -> None:
            if not limits:
                await conn.execute("DELETE FROM budget_overrides WHERE scope = %s", (scope,))
                return
            await conn.execute(
                "INSERT INTO budget_overrides(scope, limits, updated_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (scope) DO UPDATE SET limits = EXCLUDED.limits, "
                "updated_at = EXCLUDED.updated_at",
                (scope, json.dumps(dict(limits), sort_keys=True), now()),
            )

        await self._db.one(op)

    async def mark_notice(self, scope: str, marker: str) -> bool:
        async def op(conn: Conn) -> bool:
            cur = await conn.execute(
                "INSERT INTO budget_notices(scope, marker, at) VALUES (%s, %s, %s) "
                "ON CONFLICT (scope, marker) DO NOTHING",
                (scope, marker, now()),
            )
            return cur.rowcount > 0

        return await self._db.one(op)
