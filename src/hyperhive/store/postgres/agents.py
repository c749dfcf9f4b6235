"""``agent_state`` on PostgreSQL (semantics: ``base.AgentRepo``)."""

from __future__ import annotations

from collections.abc import Sequence

from hyperhive.store.base import AgentRepo
from hyperhive.store.postgres._repo import AGENT_COLS, Conn, PgRepo, agent_row, ensure_agent, now
from hyperhive.store.postgres.messages import ack_ids
from hyperhive.store.rows import AgentState, CompactRequest, TurnRecord

__all__ = ["PgAgents"]


class PgAgents(PgRepo, AgentRepo):
    async def ensure(self, names: Sequence[str]) -> None:
        if not names:
            return

        async def op(conn: Conn) -> None:
            await conn.execute(
                "INSERT INTO agent_state(name) SELECT unnest(%s::text[]) "
                "ON CONFLICT (name) DO NOTHING",
                (list(names),),
            )

        await self._db.one(op)

    async def get(self, name: str) -> AgentState:
        async def op(conn: Conn) -> AgentState:
            sql = f"SELECT {AGENT_COLS} FROM agent_state WHERE name = %s"
            row = await (await conn.execute(sql, (name,))).fetchone()
            if row is None:
                await ensure_agent(conn, name)
                row = await (await conn.execute(sql, (name,))).fetchone()
            assert row is not None
            return agent_row(row)

        return await self._tx(op)

    async def all(self) -> list[AgentState]:
        rows = await self._read(f"SELECT {AGENT_COLS} FROM agent_state ORDER BY name")
        return [agent_row(r) for r in rows]

    async def set_status(self, name: str, text: str, at: float | None) -> None:
        async def op(conn: Conn) -> None:
            await conn.execute(
                "INSERT INTO agent_state(name, status_text, status_set_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (name) DO UPDATE SET status_text = EXCLUDED.status_text, "
                "status_set_at = EXCLUDED.status_set_at",
                (name, text, at),
            )

        await self._db.one(op)

    async def record_turn(
        self,
        name: str,
        outcome: str,
        context_usage: float | None,
        session_id: str | None,
        *,
        ack: Sequence[int] = (),
    ) -> TurnRecord:
        async def op(conn: Conn) -> TurnRecord:
            await ack_ids(conn, name, ack)
            await ensure_agent(conn, name)
            cur = await conn.execute(
                "SELECT needs_login, compact_pending FROM agent_state WHERE name = %s FOR UPDATE",
                (name,),
            )
            before = await cur.fetchone()
            assert before is not None
            await conn.execute(
                "UPDATE agent_state SET last_outcome = %s, last_turn_at = %s, "
                "last_context_usage = COALESCE(%s, last_context_usage), "
                "session_id = COALESCE(%s, session_id), needs_login = %s, "
                "compact_pending = FALSE WHERE name = %s",
                (outcome, now(), context_usage, session_id, outcome == "needs_login", name),
            )
            return TurnRecord(was_needs_login=bool(before[0]), compact_pending=bool(before[1]))

        return await self._tx(op)

    async def record_started(self, name: str, hive: str, claude: str | None) -> str | None:
        async def op(conn: Conn) -> str | None:
            await ensure_agent(conn, name)
            cur = await conn.execute(
                "SELECT needs_update FROM agent_state WHERE name = %s FOR UPDATE", (name,)
            )
            before = await cur.fetchone()
            await conn.execute(
                "UPDATE agent_state SET started_hive = %s, started_claude = %s, "
                "needs_update = NULL WHERE name = %s",
                (hive, claude, name),
            )
            return None if before is None or before[0] is None else str(before[0])

        return await self._tx(op)

    async def mark_needs_update(self, name: str, behind: str) -> bool:
        async def op(conn: Conn) -> bool:
            await ensure_agent(conn, name)
            cur = await conn.execute(
                "UPDATE agent_state SET needs_update = %s WHERE name = %s AND needs_update IS NULL",
                (behind, name),
            )
            return cur.rowcount > 0

        return await self._tx(op)

    async def request_compact(self, name: str, above: float | None) -> CompactRequest:
        async def op(conn: Conn, woken: set[str]) -> CompactRequest:
            await ensure_agent(conn, name)
            cur = await conn.execute(
                "SELECT last_context_usage FROM agent_state WHERE name = %s FOR UPDATE", (name,)
            )
            row = await cur.fetchone()
            usage = None if row is None or row[0] is None else float(row[0])
            if above is not None and (usage is None or usage <= above):
                return CompactRequest(queued=False, usage=usage)
            await conn.execute(
                "UPDATE agent_state SET compact_pending = TRUE WHERE name = %s", (name,)
            )
            woken.add(name)
            return CompactRequest(queued=True, usage=usage)

        return await self._tx_waking(op)

    async def set_desired(self, name: str, running: bool) -> None:
        async def op(conn: Conn) -> None:
            await conn.execute(
                "INSERT INTO agent_state(name, desired_running) VALUES (%s, %s) "
                "ON CONFLICT (name) DO UPDATE SET desired_running = EXCLUDED.desired_running",
                (name, running),
            )

        await self._db.one(op)

    async def desired_running(self) -> frozenset[str]:
        rows = await self._read("SELECT name FROM agent_state WHERE desired_running")
        return frozenset(str(r[0]) for r in rows)

    async def delete(self, name: str) -> bool:
        async def op(conn: Conn) -> bool:
            cur = await conn.execute("DELETE FROM agent_state WHERE name = %s", (name,))
            return cur.rowcount > 0

        return await self._db.one(op)
