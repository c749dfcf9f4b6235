"""An agent's durable state row: status line, turn outcome, compact flag, desired running.

Every statement on ``agent_state`` outside the broker sits here, grouped, so the
store can take them over in one place.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from hyperhive.core.broker import ensure_agent_row
from hyperhive.core.db import Database
from hyperhive.core.notices import Notices
from hyperhive.core.notify import EventBus, Notifier
from hyperhive.errors import Conflict
from hyperhive.names import OPERATOR
from hyperhive.protocol import CompactQueued, LoggedIn, NeedsLogin, TurnEnded, TurnEndReq

__all__ = ["AgentState"]


class AgentState:
    def __init__(self, db: Database, notifier: Notifier, bus: EventBus, notices: Notices) -> None:
        self.db = db
        self.notifier = notifier
        self.bus = bus
        self.notices = notices

    async def row(self, agent: str) -> sqlite3.Row:
        """The agent's row, created with defaults on first use."""
        row: sqlite3.Row = await self.db.run(lambda c: ensure_agent_row(c, agent))
        return row

    async def ensure(self, agents: list[str]) -> None:
        await self.db.run(lambda c: [ensure_agent_row(c, a) for a in agents])

    async def set_status(self, agent: str, text: str) -> None:
        now = time.time()

        def op(conn: sqlite3.Connection) -> None:
            ensure_agent_row(conn, agent)
            conn.execute(
                "UPDATE agent_state SET status_text = ?, status_set_at = ? WHERE name = ?",
                (text, now if text else None, agent),
            )

        await self.db.run(op)
        self.bus.emit("status", agent=agent, status_text=text)

    async def turn_end(self, agent: str, req: TurnEndReq) -> TurnEnded:
        """Record the outcome; a login lost or regained is news for the submitter."""

        def op(conn: sqlite3.Connection) -> tuple[bool, bool]:
            row = ensure_agent_row(conn, agent)
            conn.execute(
                "UPDATE agent_state SET last_outcome = ?, last_turn_at = ?, "
                "last_context_usage = COALESCE(?, last_context_usage), "
                "session_id = COALESCE(?, session_id), needs_login = ?, compact_pending = 0 "
                "WHERE name = ?",
                (
                    req.outcome,
                    time.time(),
                    req.context_usage,
                    req.session_id,
                    int(req.outcome == "needs_login"),
                    agent,
                ),
            )
            return bool(row["needs_login"]), bool(row["compact_pending"])

        was_login, compact = await self.db.run(op)
        if req.outcome == "needs_login" and not was_login:
            await self.notices.notify_submitter(agent, NeedsLogin(agent=agent))
        elif req.outcome == "ok" and was_login:
            await self.notices.notify_submitter(agent, LoggedIn(agent=agent))
        return TurnEnded(compact_pending=compact)

    async def request_compact(self, agent: str, threshold: float) -> CompactQueued:
        def op(conn: sqlite3.Connection) -> float:
            usage = ensure_agent_row(conn, agent)["last_context_usage"]
            if usage is None or usage <= threshold:
                shown = "unknown (no turn recorded yet)" if usage is None else f"{usage:.0%}"
                raise Conflict(
                    f"compact refused: the last turn used {shown} of the context window; "
                    f"compaction is allowed above {threshold:.0%}. Nothing was changed"
                )
            conn.execute("UPDATE agent_state SET compact_pending = 1 WHERE name = ?", (agent,))
            return float(usage)

        usage = await self.db.run(op)
        self.notifier.notify(agent)
        return CompactQueued(
            queued=True, context_usage=usage, note="compaction runs when the current turn ends"
        )

    async def desired_running(self, agent: str) -> bool:
        return bool((await self.row(agent))["desired_running"])

    async def set_desired_running(self, agent: str, running: bool) -> None:
        def op(conn: sqlite3.Connection) -> None:
            ensure_agent_row(conn, agent)
            conn.execute(
                "UPDATE agent_state SET desired_running = ? WHERE name = ?", (int(running), agent)
            )

        await self.db.run(op)

    async def all_desired_running(self) -> set[str]:
        rows = await self.db.run(
            lambda c: c.execute("SELECT name FROM agent_state WHERE desired_running = 1").fetchall()
        )
        return {str(r["name"]) for r in rows}

    async def forget(self, agent: str) -> None:
        await self.db.run(lambda c: c.execute("DELETE FROM agent_state WHERE name = ?", (agent,)))

    async def all_rows(self) -> dict[str, dict[str, Any]]:
        return await self.db.run(
            lambda c: {r["name"]: dict(r) for r in c.execute("SELECT * FROM agent_state")}
        )

    async def unread_by_operator(self) -> dict[str, int]:
        """Per sender, its messages to the operator not yet acked."""
        rows = await self.db.run(
            lambda c: c.execute(
                "SELECT sender, COUNT(*) FROM messages "
                "WHERE recipient = ? AND acked_at IS NULL GROUP BY sender",
                (OPERATOR,),
            ).fetchall()
        )
        return {str(r[0]): int(r[1]) for r in rows}
