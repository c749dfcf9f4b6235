"""``agent_state`` on SQLite: status, turns, compaction, desired running state."""

from __future__ import annotations

import time
from collections.abc import Sequence

from hyperhive.store.base import AgentRepo
from hyperhive.store.rows import AgentState, CompactRequest, TurnRecord
from hyperhive.store.sqlite.common import ensure_agent
from hyperhive.store.sqlite.engine import Engine, Tx
from hyperhive.store.sqlite.messages import ack_ids
from hyperhive.store.sqlite.rowmap import agent_state

__all__ = ["SqliteAgents"]


class SqliteAgents(AgentRepo):
    def __init__(self, engine: Engine) -> None:
        self._db = engine

    async def ensure(self, names: Sequence[str]) -> None:
        def op(tx: Tx) -> None:
            tx.conn.executemany(
                "INSERT OR IGNORE INTO agent_state(name) VALUES (?)", [(n,) for n in names]
            )

        await self._db.run(op)

    async def get(self, name: str) -> AgentState:
        # Creating a default row needs no fsync: lost, it is recreated alike.
        return await self._db.run(lambda tx: ensure_agent(tx, name), durable=False)

    async def all(self) -> list[AgentState]:
        rows = await self._db.run(
            lambda tx: tx.all("SELECT * FROM agent_state ORDER BY name"), durable=False
        )
        return [agent_state(r) for r in rows]

    async def set_status(self, name: str, text: str, at: float | None) -> None:
        def op(tx: Tx) -> None:
            ensure_agent(tx, name)
            tx.execute(
                "UPDATE agent_state SET status_text = ?, status_set_at = ? WHERE name = ?",
                (text, at, name),
            )

        await self._db.run(op)

    async def record_turn(
        self,
        name: str,
        outcome: str,
        context_usage: float | None,
        session_id: str | None,
        *,
        ack: Sequence[int] = (),
    ) -> TurnRecord:
        def op(tx: Tx) -> TurnRecord:
            if ack:
                ack_ids(tx, name, ack)
            before = ensure_agent(tx, name)
            tx.execute(
                "UPDATE agent_state SET last_outcome = ?, last_turn_at = ?, "
                "last_context_usage = COALESCE(?, last_context_usage), "
                "session_id = COALESCE(?, session_id), needs_login = ?, compact_pending = 0 "
                "WHERE name = ?",
                (
                    outcome,
                    time.time(),
                    context_usage,
                    session_id,
                    int(outcome == "needs_login"),
                    name,
                ),
            )
            return TurnRecord(
                was_needs_login=before.needs_login, compact_pending=before.compact_pending
            )

        return await self._db.run(op)

    async def request_compact(self, name: str, above: float | None) -> CompactRequest:
        def op(tx: Tx) -> CompactRequest:
            usage = ensure_agent(tx, name).last_context_usage
            if above is not None and (usage is None or usage <= above):
                return CompactRequest(queued=False, usage=usage)
            tx.execute("UPDATE agent_state SET compact_pending = 1 WHERE name = ?", (name,))
            tx.wake(name)
            return CompactRequest(queued=True, usage=usage)

        return await self._db.run(op)

    async def record_started(self, name: str, hive: str, claude: str | None) -> str | None:
        def op(tx: Tx) -> str | None:
            before = ensure_agent(tx, name).needs_update
            tx.execute(
                "UPDATE agent_state SET started_hive = ?, started_claude = ?, "
                "needs_update = NULL WHERE name = ?",
                (hive, claude, name),
            )
            return before

        return await self._db.run(op)

    async def mark_needs_update(self, name: str, behind: str) -> bool:
        def op(tx: Tx) -> bool:
            ensure_agent(tx, name)
            return (
                tx.execute(
                    "UPDATE agent_state SET needs_update = ? "
                    "WHERE name = ? AND needs_update IS NULL",
                    (behind, name),
                ).rowcount
                > 0
            )

        return await self._db.run(op)

    async def set_desired(self, name: str, running: bool) -> None:
        def op(tx: Tx) -> None:
            ensure_agent(tx, name)
            tx.execute(
                "UPDATE agent_state SET desired_running = ? WHERE name = ?", (int(running), name)
            )

        await self._db.run(op)

    async def desired_running(self) -> frozenset[str]:
        rows = await self._db.run(
            lambda tx: tx.all("SELECT name FROM agent_state WHERE desired_running = 1"),
            durable=False,
        )
        return frozenset(str(r[0]) for r in rows)

    async def delete(self, name: str) -> bool:
        return await self._db.run(
            lambda tx: tx.execute("DELETE FROM agent_state WHERE name = ?", (name,)).rowcount > 0
        )
