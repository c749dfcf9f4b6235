"""What every PostgreSQL repository shares: the database, wake-ups, row shapes."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from psycopg import AsyncConnection

from hyperhive.store.base import ChangeFeed
from hyperhive.store.postgres.database import PgDatabase
from hyperhive.store.postgres.listener import CHANNEL
from hyperhive.store.rows import AgentState, MessageRow

__all__ = [
    "AGENT_COLS",
    "MSG_COLS",
    "Conn",
    "PgRepo",
    "agent_row",
    "ensure_agent",
    "heard",
    "message_row",
    "notify",
    "now",
]

_T = TypeVar("_T")
Conn = AsyncConnection[Any]

# Column lists in the order of the row dataclasses' fields: rows are built positionally.
MSG_COLS = "id, sender, recipient, body, in_reply_to, created_at, delivered_at, acked_at"
AGENT_COLS = (
    "name, status_text, status_set_at, incarnation, fenced, compact_pending, "
    "last_context_usage, last_outcome, last_turn_at, session_id, todo_version, "
    "desired_running, needs_login, started_hive, started_claude, needs_update"
)


def message_row(row: tuple[Any, ...]) -> MessageRow:
    return MessageRow(*row)


def agent_row(row: tuple[Any, ...]) -> AgentState:
    return AgentState(*row)


async def notify(conn: Conn, origin: str, agents: Iterable[str]) -> None:
    """NOTIFY each agent inside the caller's transaction: sent exactly when it commits.

    The payload is ``<origin>:<agent>``, ``origin`` naming the store that wrote it.
    """
    names = sorted(set(agents))
    if names:
        await conn.execute(
            "SELECT pg_notify(%s, %s || ':' || a) FROM unnest(%s::text[]) AS a",
            (CHANNEL, origin, names),
        )


def heard(payload: str, origin: str) -> str | None:
    """The agent a NOTIFY payload wakes, or ``None`` if ``origin`` itself sent it."""
    sender, sep, agent = payload.partition(":")
    if not sep or not agent or sender == origin:
        return None
    return agent


async def ensure_agent(conn: Conn, name: str) -> None:
    await conn.execute(
        "INSERT INTO agent_state(name) VALUES (%s) ON CONFLICT (name) DO NOTHING", (name,)
    )


class PgRepo:
    """A repository: one transaction per method, waking agents after the commit."""

    def __init__(self, db: PgDatabase, feed: ChangeFeed) -> None:
        self._db = db
        self._feed = feed

    async def _tx(self, op: Callable[[Conn], Awaitable[_T]]) -> _T:
        return await self._db.tx(op)

    async def _tx_waking(self, op: Callable[[Conn, set[str]], Awaitable[_T]]) -> _T:
        """Run ``op(conn, woken)``; NOTIFY ``woken`` in the transaction, publish it after."""
        woken: set[str] = set()

        async def run(conn: Conn) -> _T:
            woken.clear()  # a retried transaction starts afresh
            result = await op(conn, woken)
            await notify(conn, self._db.origin, woken)
            return result

        result = await self._db.tx(run)
        self._feed.publish(sorted(woken))
        return result

    async def _read(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[Any]:
        async def op(conn: Conn) -> list[Any]:
            cur = await conn.execute(sql, params)
            return await cur.fetchall()

        return await self._db.read(op)


def now() -> float:
    return time.time()
