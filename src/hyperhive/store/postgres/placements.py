"""Agent → host assignments and moves in progress on PostgreSQL (semantics:
``base.PlacementRepo``)."""

from __future__ import annotations

from typing import Any

from hyperhive.errors import Conflict, NotFound
from hyperhive.store.base import PlacementRepo, move_missing
from hyperhive.store.postgres._repo import Conn, PgRepo, now
from hyperhive.store.rows import Assignment

__all__ = ["PgPlacements"]

_COLS = "agent, host, pinned, assigned_at, move_id, move_from, move_to, move_phase"


def _row(row: tuple[Any, ...]) -> Assignment:
    return Assignment(*row)


class PgPlacements(PgRepo, PlacementRepo):
    async def get(self, agent: str) -> Assignment | None:
        rows = await self._read(f"SELECT {_COLS} FROM placements WHERE agent = %s", (agent,))
        return _row(rows[0]) if rows else None

    async def all(self) -> list[Assignment]:
        return [_row(r) for r in await self._read(f"SELECT {_COLS} FROM placements ORDER BY agent")]

    async def per_host(self) -> dict[str, int]:
        rows = await self._read("SELECT host, COUNT(*) FROM placements GROUP BY host")
        return {host: int(n) for host, n in rows}

    async def assign(self, agent: str, host: str, *, pinned: bool) -> Assignment:
        async def op(conn: Conn) -> Assignment:
            cur = await conn.execute(
                "INSERT INTO placements(agent, host, pinned, assigned_at) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (agent) DO UPDATE SET host = excluded.host, "
                f"pinned = excluded.pinned, assigned_at = excluded.assigned_at RETURNING {_COLS}",
                (agent, host, pinned, now()),
            )
            row = await cur.fetchone()
            assert row is not None
            return _row(row)

        return await self._tx(op)

    async def forget(self, agent: str) -> None:
        async def op(conn: Conn) -> None:
            await conn.execute("DELETE FROM placements WHERE agent = %s", (agent,))

        await self._tx(op)

    async def begin_move(self, agent: str, move_id: str, target: str) -> Assignment:
        async def op(conn: Conn) -> Assignment:
            cur = await conn.execute(
                f"SELECT {_COLS} FROM placements WHERE agent = %s FOR UPDATE", (agent,)
            )
            current = await cur.fetchone()
            if current is None:
                raise NotFound(f"{agent} is not placed on any agent host yet; start it first")
            moving = _row(current)
            if moving.move_id is not None:
                raise Conflict(
                    f"{agent} is already moving ({moving.move_from} → {moving.move_to}, "
                    f"{moving.move_phase}); wait for it to finish"
                )
            cur = await conn.execute(
                "UPDATE placements SET move_id = %s, move_from = host, move_to = %s, "
                f"move_phase = 'draining' WHERE agent = %s RETURNING {_COLS}",
                (move_id, target, agent),
            )
            row = await cur.fetchone()
            assert row is not None
            return _row(row)

        return await self._tx(op)

    async def move_phase(self, agent: str, move_id: str, phase: str) -> None:
        async def op(conn: Conn) -> None:
            cur = await conn.execute(
                "UPDATE placements SET move_phase = %s WHERE agent = %s AND move_id = %s",
                (phase, agent, move_id),
            )
            if cur.rowcount == 0:
                raise move_missing(agent)

        await self._tx(op)

    async def commit_move(self, agent: str, move_id: str) -> Assignment:
        async def op(conn: Conn) -> Assignment:
            cur = await conn.execute(
                "UPDATE placements SET host = move_to, assigned_at = %s, move_phase = 'cleanup' "
                f"WHERE agent = %s AND move_id = %s RETURNING {_COLS}",
                (now(), agent, move_id),
            )
            row = await cur.fetchone()
            if row is None:
                raise move_missing(agent)
            return _row(row)

        return await self._tx(op)

    async def end_move(self, agent: str, move_id: str) -> None:
        async def op(conn: Conn) -> None:
            await conn.execute(
                "UPDATE placements SET move_id = NULL, move_from = NULL, move_to = NULL, "
                "move_phase = NULL WHERE agent = %s AND move_id = %s",
                (agent, move_id),
            )

        await self._tx(op)
