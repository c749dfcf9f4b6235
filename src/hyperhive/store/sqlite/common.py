"""Statements and row mappings more than one SQLite repository needs."""

from __future__ import annotations

import sqlite3
import time

from hyperhive.errors import NotFound
from hyperhive.store.rows import AgentState, MessageRow
from hyperhive.store.sqlite.engine import Tx

__all__ = ["agent_state", "ensure_agent", "insert_message", "message_row", "placeholders"]


def placeholders(n: int) -> str:
    return ",".join("?" * n)


def message_row(r: sqlite3.Row) -> MessageRow:
    return MessageRow(
        id=r["id"],
        sender=r["sender"],
        recipient=r["recipient"],
        body=r["body"],
        in_reply_to=r["in_reply_to"],
        created_at=r["created_at"],
        delivered_at=r["delivered_at"],
        acked_at=r["acked_at"],
    )


def agent_state(r: sqlite3.Row) -> AgentState:
    return AgentState(
        name=r["name"],
        status_text=r["status_text"],
        status_set_at=r["status_set_at"],
        incarnation=r["incarnation"],
        fenced=bool(r["fenced"]),
        compact_pending=bool(r["compact_pending"]),
        last_context_usage=r["last_context_usage"],
        last_outcome=r["last_outcome"],
        last_turn_at=r["last_turn_at"],
        session_id=r["session_id"],
        todo_version=r["todo_version"],
        desired_running=bool(r["desired_running"]),
        needs_login=bool(r["needs_login"]),
    )


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
