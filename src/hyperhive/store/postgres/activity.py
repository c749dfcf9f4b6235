"""The activity log on PostgreSQL (semantics: ``base.ActivityRepo``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from hyperhive.store.activity import COLS, TOP, activity_row
from hyperhive.store.base import ActivityRepo, FeedCursor
from hyperhive.store.postgres._repo import Conn, PgRepo, now
from hyperhive.store.rows import ActivityRow

__all__ = ["PgActivity"]

# Strictly before the cursor: the ``at <=`` bound is the index range, the rest a filter.
BEFORE = "{t}.at <= %(t)s AND ({t}.at < %(t)s OR {t}.id < %(b)s)"


class PgActivity(PgRepo, ActivityRepo):
    async def record(
        self,
        kind: str,
        agent: str,
        title: str,
        *,
        others: Sequence[str] = (),
        detail: Mapping[str, Any] | None = None,
        key: str | None = None,
        at: float | None = None,
    ) -> ActivityRow | None:
        when = now() if at is None else at
        rest = tuple(dict.fromkeys(o for o in others if o != agent))
        data = dict(detail or {})

        async def op(conn: Conn) -> ActivityRow | None:
            cur = await conn.execute(
                "INSERT INTO activity(at, kind, agent, others, title, detail, key) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (key) DO NOTHING RETURNING id",
                (when, kind, agent, json.dumps(rest), title, json.dumps(data), key),
            )
            row = await cur.fetchone()
            if row is None:
                return None
            async with conn.cursor() as c:
                await c.executemany(
                    "INSERT INTO activity_agents(agent, kind, at, id) VALUES (%s, %s, %s, %s)",
                    [(name, kind, when, row[0]) for name in (agent, *rest)],
                )
            return ActivityRow(int(row[0]), when, kind, agent, rest, title, data)

        return await self._db.tx(op)

    async def page(
        self,
        before: FeedCursor | None = None,
        limit: int = 50,
        *,
        agent: str | None = None,
        kind: str | None = None,
        since: float | None = None,
    ) -> list[ActivityRow]:
        at, below = before or TOP
        t = "a" if agent is None else "x"
        where = BEFORE.format(t=t)
        source = "activity a"
        if agent is not None:
            where = "x.agent = %(a)s AND " + where
            source = "activity_agents x JOIN activity a ON a.id = x.id"
        if kind is not None:
            where += f" AND {t}.kind = %(k)s"
        if since is not None:
            where += f" AND {t}.at >= %(s)s"
        rows = await self._read(
            f"SELECT {COLS} FROM {source} WHERE {where} "
            f"ORDER BY {t}.at DESC, {t}.id DESC LIMIT %(n)s",
            {"a": agent, "k": kind, "t": at, "b": below, "s": since, "n": max(0, limit)},
        )
        return [activity_row(r) for r in rows]

    async def prune(self, older_than: float) -> int:
        async def op(conn: Conn) -> int:
            await conn.execute("DELETE FROM activity_agents WHERE at < %s", (older_than,))
            cur = await conn.execute("DELETE FROM activity WHERE at < %s", (older_than,))
            return cur.rowcount

        return await self._db.tx(op)
