"""The activity log on SQLite (semantics: ``base.ActivityRepo``)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from hyperhive.store.activity import COLS, TOP, activity_row
from hyperhive.store.base import ActivityRepo, FeedCursor
from hyperhive.store.rows import ActivityRow
from hyperhive.store.sqlite.engine import Engine, Tx

__all__ = ["SqliteActivity"]

# Strictly before the cursor: the ``at <=`` bound is the index range, the rest a filter.
BEFORE = "{t}.at <= ? AND ({t}.at < ? OR {t}.id < ?)"


class SqliteActivity(ActivityRepo):
    def __init__(self, engine: Engine) -> None:
        self._db = engine

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
        when = time.time() if at is None else at
        rest = tuple(dict.fromkeys(o for o in others if o != agent))
        data = dict(detail or {})

        def op(tx: Tx) -> ActivityRow | None:
            row = tx.one(
                "INSERT INTO activity(at, kind, agent, others, title, detail, key) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING id",
                (when, kind, agent, json.dumps(rest), title, json.dumps(data), key),
            )
            if row is None:
                return None
            tx.conn.executemany(
                "INSERT INTO activity_agents(agent, kind, at, id) VALUES (?, ?, ?, ?)",
                [(name, kind, when, row[0]) for name in (agent, *rest)],
            )
            return ActivityRow(row[0], when, kind, agent, rest, title, data)

        return await self._db.run(op)

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
        params: list[Any] = []
        if agent is None:
            where = BEFORE.format(t="a")
            source = "activity a"
        else:
            where = "x.agent = ? AND " + BEFORE.format(t="x")
            source = "activity_agents x JOIN activity a ON a.id = x.id"
            params.append(agent)
        params += [at, at, below]
        if kind is not None:
            where += f" AND {'a' if agent is None else 'x'}.kind = ?"
            params.append(kind)
        t = "a" if agent is None else "x"
        if since is not None:
            where += f" AND {t}.at >= ?"
            params.append(since)
        sql = f"SELECT {COLS} FROM {source} WHERE {where} ORDER BY {t}.at DESC, {t}.id DESC LIMIT ?"
        params.append(max(0, limit))
        rows = await self._db.run(lambda tx: tx.all(sql, tuple(params)), durable=False)
        return [activity_row(r) for r in rows]

    async def prune(self, older_than: float) -> int:
        def op(tx: Tx) -> int:
            tx.execute("DELETE FROM activity_agents WHERE at < ?", (older_than,))
            return tx.execute("DELETE FROM activity WHERE at < ?", (older_than,)).rowcount

        return await self._db.run(op)
