"""Statements more than one SQLite repository needs."""

from __future__ import annotations

import time

from hyperhive.errors import NotFound
from hyperhive.store.rows import AgentState
from hyperhive.store.sqlite.engine import Tx
from hyperhive.store.sqlite.rowmap import agent_state

__all__ = ["ensure_agent", "insert_message", "placeholders"]


def placeholders(n: int) -> str:
    return ",".join("?" * n)


def ensure_agent(tx: Tx, agent: str) -> AgentState:
    tx.execute("INSERT OR IGNORE INTO agent_state(name) VALUES (?)", (agent,))
    row = tx.one("SELECT * FROM agent_state WHERE name = ?", (agent,))
    assert row is not None
    return agent_state(row)


def insert_message(tx: Tx, sender: str, recipient: str, body: str, in_reply_to: int | None) -> int:
    """One message row; wakes ``recipient`` on commit."""
    reply = in_reply_to if in_reply_to is not None and in_reply_to > 0 else None
    if reply is not None and tx.one("SELECT 1 FROM messages WHERE id = ?", (reply,)) is None:
        raise NotFound(f"in_reply_to #{reply}: no such message")
    msg_id = tx.insert(
        "INSERT INTO messages(sender, recipient, body, in_reply_to, created_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (sender, recipient, body, reply, time.time()),
    )
    tx.wake(recipient)
    return msg_id
