"""Schema 15 on PostgreSQL: spend rows say their session, sessions keep their totals, old
rows repaired (the same logical step as SQLite's ``store.sqlite.spendfix``).

The rule of the repair is :mod:`hyperhive.store.spendrepair`; this runs it
inside the migration's transaction and logs what it changed.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from psycopg import AsyncConnection

from hyperhive.runcost import UNKNOWN_MODEL
from hyperhive.store.spendrepair import OldRun, plan

__all__ = ["schema_15"]

log = logging.getLogger(__name__)

_DDL = (
    "ALTER TABLE spend ADD COLUMN session_id TEXT",
    "ALTER TABLE spend ADD COLUMN session_usd DOUBLE PRECISION",
    """CREATE TABLE spend_sessions (
    agent TEXT NOT NULL,
    session_id TEXT NOT NULL,
    model TEXT NOT NULL,
    cost_usd DOUBLE PRECISION NOT NULL,
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cache_read_tokens BIGINT NOT NULL,
    cache_creation_tokens BIGINT NOT NULL,
    at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (agent, session_id, model)
)""",
)


async def schema_15(conn: AsyncConnection[Any]) -> None:
    """Add the session columns and table, then recount the old rows (in the caller's
    transaction)."""
    for statement in _DDL:
        await conn.execute(statement)
    cur = await conn.execute("SELECT id, agent, key, kind, cost_usd FROM spend ORDER BY id")
    rows = [OldRun(int(r[0]), r[1], r[2], r[3], float(r[4])) for r in await cur.fetchall()]
    cur = await conn.execute(
        "SELECT key, title, detail FROM activity WHERE kind = 'turn' AND key IS NOT NULL"
    )
    feed = {r[0]: (r[1], r[2]) for r in await cur.fetchall()}
    cur = await conn.execute(
        "SELECT name, session_id FROM agent_state WHERE session_id IS NOT NULL"
    )
    sessions = {r[0]: r[1] for r in await cur.fetchall()}
    fix = plan(rows, feed, sessions)
    async with conn.cursor() as c:
        await c.executemany(
            "UPDATE spend SET cost_usd = %s, session_usd = %s WHERE id = %s", fix.spend
        )
        await c.executemany("UPDATE activity SET title = %s, detail = %s WHERE key = %s", fix.feed)
        now = time.time()
        await c.executemany(
            "INSERT INTO spend_sessions(agent, session_id, model, cost_usd, input_tokens, "
            "output_tokens, cache_read_tokens, cache_creation_tokens, at) "
            "VALUES (%s, %s, %s, %s, 0, 0, 0, 0, %s)",
            [(agent, sid, UNKNOWN_MODEL, usd, now) for agent, sid, usd in fix.seeds],
        )
    log.info("hive database %s", fix.summary())
