"""Agent → host assignments and moves in progress on SQLite (semantics: ``base.PlacementRepo``)."""

from __future__ import annotations

import sqlite3
import time

from hyperhive.errors import Conflict, NotFound
from hyperhive.store.base import PlacementRepo, move_missing
from hyperhive.store.rows import Assignment
from hyperhive.store.sqlite.engine import Engine, Tx

__all__ = ["SqlitePlacements"]


def _row(r: sqlite3.Row) -> Assignment:
    return Assignment(
        agent=r["agent"],
        host=r["host"],
        pinned=bool(r["pinned"]),
        assigned_at=r["assigned_at"],
        move_id=r["move_id"],
        move_from=r["move_from"],
        move_to=r["move_to"],
        move_phase=r["move_phase"],
    )


class SqlitePlacements(PlacementRepo):
    def __init__(self, engine: Engine) -> None:
        self._db = engine

    async def get(self, agent: str) -> Assignment | None:
        row = await self._db.run(
            lambda tx: tx.one("SELECT * FROM placements WHERE agent = ?", (agent,)),
            durable=False,
        )
        return None if row is None else _row(row)

    async def all(self) -> list[Assignment]:
        rows = await self._db.run(
            lambda tx: tx.all("SELECT * FROM placements ORDER BY agent"), durable=False
        )
        return [_row(r) for r in rows]

    async def per_host(self) -> dict[str, int]:
        rows = await self._db.run(
            lambda tx: tx.all("SELECT host, COUNT(*) AS n FROM placements GROUP BY host"),
            durable=False,
        )
        return {r["host"]: r["n"] for r in rows}

    async def assign(self, agent: str, host: str, *, pinned: bool) -> Assignment:
        def op(tx: Tx) -> Assignment:
            row = tx.one(
                "INSERT INTO placements(agent, host, pinned, assigned_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (agent) DO UPDATE SET host = excluded.host, "
                "pinned = excluded.pinned, assigned_at = excluded.assigned_at RETURNING *",
                (agent, host, int(pinned), time.time()),
            )
            assert row is not None
            return _row(row)

        return await self._db.run(op)

    async def forget(self, agent: str) -> None:
        await self._db.run(
            lambda tx: tx.execute("DELETE FROM placements WHERE agent = ?", (agent,))
        )

    async def begin_move(self, agent: str, move_id: str, target: str) -> Assignment:
        def op(tx: Tx) -> Assignment:
            current = tx.one("SELECT * FROM placements WHERE agent = ?", (agent,))
            if current is None:
                raise NotFound(f"{agent} is not placed on any agent host yet; start it first")
            if current["move_id"] is not None:
                raise Conflict(
                    f"{agent} is already moving ({current['move_from']} → "
                    f"{current['move_to']}, {current['move_phase']}); wait for it to finish"
                )
            row = tx.one(
                "UPDATE placements SET move_id = ?, move_from = host, move_to = ?, "
                "move_phase = 'draining' WHERE agent = ? RETURNING *",
                (move_id, target, agent),
            )
            assert row is not None
            return _row(row)

        return await self._db.run(op)

    async def move_phase(self, agent: str, move_id: str, phase: str) -> None:
        def op(tx: Tx) -> None:
            cur = tx.execute(
                "UPDATE placements SET move_phase = ? WHERE agent = ? AND move_id = ?",
                (phase, agent, move_id),
            )
            if cur.rowcount == 0:
                raise move_missing(agent)

        await self._db.run(op)

    async def commit_move(self, agent: str, move_id: str) -> Assignment:
        def op(tx: Tx) -> Assignment:
            row = tx.one(
                "UPDATE placements SET host = move_to, assigned_at = ?, move_phase = 'cleanup' "
                "WHERE agent = ? AND move_id = ? RETURNING *",
                (time.time(), agent, move_id),
            )
            if row is None:
                raise move_missing(agent)
            return _row(row)

        return await self._db.run(op)

    async def end_move(self, agent: str, move_id: str) -> None:
        await self._db.run(
            lambda tx: tx.execute(
                "UPDATE placements SET move_id = NULL, move_from = NULL, move_to = NULL, "
                "move_phase = NULL WHERE agent = ? AND move_id = ?",
                (agent, move_id),
            )
        )
