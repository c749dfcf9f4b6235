"""Schema 15 on SQLite: spend rows say their session, sessions keep their totals, old rows repaired.

The rule of the repair is :mod:`hyperhive.store.spendrepair`; this runs it
inside the migration's transaction and logs what it changed.
"""

from __future__ import annotations

import logging
import sqlite3
import time

from hyperhive.runcost import UNKNOWN_MODEL
from hyperhive.store.spendrepair import OldRun, plan

__all__ = ["schema_15"]

log = logging.getLogger(__name__)

_DDL = (
    "ALTER TABLE spend ADD COLUMN session_id TEXT",
    "ALTER TABLE spend ADD COLUMN session_usd REAL",
    """CREATE TABLE spend_sessions (
    agent TEXT NOT NULL,
    session_id TEXT NOT NULL,
    model TEXT NOT NULL,
    cost_usd REAL NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL,
    cache_creation_tokens INTEGER NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (agent, session_id, model)
)""",
)


def schema_15(conn: sqlite3.Connection) -> None:
    """Add the session columns and table, then recount the old rows (in the caller's
    transaction)."""
    for statement in _DDL:
        conn.execute(statement)
    rows = [
        OldRun(int(r[0]), r[1], r[2], r[3], float(r[4]))
        for r in conn.execute("SELECT id, agent, key, kind, cost_usd FROM spend ORDER BY id")
    ]
    feed = {
        r[0]: (r[1], r[2])
        for r in conn.execute(
            "SELECT key, title, detail FROM activity WHERE kind = 'turn' AND key IS NOT NULL"
        )
    }
    sessions = {
        r[0]: r[1]
        for r in conn.execute(
            "SELECT name, session_id FROM agent_state WHERE session_id IS NOT NULL"
        )
    }
    fix = plan(rows, feed, sessions)
    conn.executemany("UPDATE spend SET cost_usd = ?, session_usd = ? WHERE id = ?", fix.spend)
    conn.executemany("UPDATE activity SET title = ?, detail = ? WHERE key = ?", fix.feed)
    now = time.time()
    conn.executemany(
        "INSERT INTO spend_sessions(agent, session_id, model, cost_usd, input_tokens, "
        "output_tokens, cache_read_tokens, cache_creation_tokens, at) "
        "VALUES (?, ?, ?, ?, 0, 0, 0, 0, ?)",
        [(agent, sid, UNKNOWN_MODEL, usd, now) for agent, sid, usd in fix.seeds],
    )
    log.info("hive.db %s", fix.summary())
