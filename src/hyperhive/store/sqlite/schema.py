"""Numbered schema migrations for ``hive.db`` (append only; never edit a shipped one).

Schema 1 is the one hyperhive shipped before the store package; a hive.db at
schema 1 is upgraded in place. Schema 2 moves topology, applied configs and
the deploy log into the database, so no state lives only in the meta repo.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from hyperhive.store.sqlite.spendfix import schema_15

__all__ = ["MIGRATIONS", "Migration"]

#: SQL statements (split on ``;\n``), or a function run in the migration's transaction.
Migration = str | Callable[[sqlite3.Connection], None]

MIGRATIONS: list[Migration] = [
    # 1: broker, per-agent state, loose ends, events.
    """
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    sender TEXT NOT NULL,
    recipient TEXT NOT NULL,
    body TEXT NOT NULL,
    in_reply_to INTEGER,
    created_at REAL NOT NULL,
    delivered_at REAL,
    acked_at REAL
);
CREATE INDEX messages_pending ON messages(recipient, acked_at, delivered_at, id);
CREATE INDEX messages_sender ON messages(sender, id);
CREATE TABLE agent_state (
    name TEXT PRIMARY KEY,
    status_text TEXT NOT NULL DEFAULT '',
    status_set_at REAL,
    incarnation INTEGER NOT NULL DEFAULT 0,
    fenced INTEGER NOT NULL DEFAULT 0,
    compact_pending INTEGER NOT NULL DEFAULT 0,
    last_context_usage REAL,
    last_outcome TEXT,
    last_turn_at REAL,
    session_id TEXT,
    todo_version INTEGER NOT NULL DEFAULT 0,
    desired_running INTEGER NOT NULL DEFAULT 1,
    needs_login INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE reminders (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    agent TEXT NOT NULL,
    message TEXT NOT NULL,
    due_at REAL NOT NULL,
    created_at REAL NOT NULL,
    fired_at REAL
);
CREATE INDEX reminders_due ON reminders(fired_at, due_at);
CREATE TABLE todos (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    agent TEXT NOT NULL,
    subsystem TEXT NOT NULL,
    key TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    UNIQUE (agent, subsystem, key)
);
CREATE TABLE approvals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    requester TEXT NOT NULL,
    subject TEXT NOT NULL,
    payload TEXT NOT NULL DEFAULT '{}',
    state TEXT NOT NULL DEFAULT 'pending',
    created_at REAL NOT NULL,
    resolved_at REAL,
    resolution TEXT
);
CREATE TABLE questions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    asker TEXT NOT NULL,
    question TEXT NOT NULL,
    message_id INTEGER,
    state TEXT NOT NULL DEFAULT 'open',
    answer TEXT,
    created_at REAL NOT NULL,
    answered_at REAL
);
CREATE TABLE schedules (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    owner TEXT NOT NULL,
    target TEXT NOT NULL,
    prompt TEXT NOT NULL,
    every_seconds REAL,
    cron TEXT,
    next_at REAL NOT NULL,
    created_at REAL NOT NULL,
    cancelled_at REAL
);
CREATE INDEX schedules_next ON schedules(cancelled_at, next_at);
CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    agent TEXT,
    data TEXT NOT NULL DEFAULT '{}'
)
""",
    # 2: topology, applied configs, the deploy log (the meta log).
    """
CREATE TABLE topology (
    agent TEXT PRIMARY KEY,
    parent TEXT
);
CREATE TABLE applied_configs (
    agent TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    applied_at REAL NOT NULL,
    seq INTEGER NOT NULL
);
CREATE TABLE deploy_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    action TEXT NOT NULL,
    agent TEXT,
    message TEXT NOT NULL,
    config TEXT,
    topology TEXT
);
CREATE INDEX deploy_log_agent ON deploy_log(agent, seq);
CREATE INDEX reminders_agent ON reminders(agent, fired_at);
CREATE INDEX approvals_pending ON approvals(state, kind, subject);
CREATE INDEX messages_reply ON messages(in_reply_to)
""",
    # 3: each todo remembers the agent's todo_version its last upsert made, so a
    # waiting agent wakes only for a todo still open and newer than what it saw.
    """
ALTER TABLE todos ADD COLUMN version INTEGER NOT NULL DEFAULT 0
""",
    # 4: a producer's delivery keys (a forge notification, a Matrix event): a wake
    # resent after a crash between "accepted" and "noted" lands once.
    """
CREATE TABLE delivery_keys (
    recipient TEXT NOT NULL,
    sender TEXT NOT NULL,
    key TEXT NOT NULL,
    message_id INTEGER NOT NULL,
    PRIMARY KEY (recipient, sender, key)
)
""",
    # 5 (budgets, #15): spend per claude run, keyed so a resent
    # turn_end counts once; run-time limit overrides; notices already sent.
    """
CREATE TABLE spend (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    agent TEXT NOT NULL,
    key TEXT NOT NULL,
    kind TEXT NOT NULL,
    at REAL NOT NULL,
    cost_usd REAL NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL,
    cache_creation_tokens INTEGER NOT NULL,
    UNIQUE (agent, key)
);
CREATE INDEX spend_at ON spend(at);
CREATE INDEX spend_agent_at ON spend(agent, at);
CREATE TABLE budget_overrides (
    scope TEXT PRIMARY KEY,
    limits TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE budget_notices (
    scope TEXT NOT NULL,
    marker TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (scope, marker)
)
""",
    # 9 (netlink; positional, after what main has): remote agent hosts; only a hash of
    # each host's credential is kept.
    """
CREATE TABLE hosts (
    name TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL,
    created_at REAL NOT NULL,
    rotated_at REAL,
    revoked_at REAL,
    last_seen_at REAL
)
""",
    # 8 (hostlife, #14): each host's lease: its link epoch (monotonic per host, so a
    # superseded link is fenced), the lease's expiry, the last heartbeat and capacity.
    """
ALTER TABLE hosts ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE hosts ADD COLUMN lease_expires_at REAL;
ALTER TABLE hosts ADD COLUMN heartbeat_at REAL;
ALTER TABLE hosts ADD COLUMN capacity TEXT
""",
    # 7 (feed, #15; positional, after hostlife's 8): what the hive did, for the
    # dashboard's front page. One row per event; ``activity_agents`` indexes it by
    # every agent it concerns, so a page of one agent's feed is an index walk.
    # Messages are paged by time too (the feed merges them by ``(at, id)``).
    # Approvals already asked or resolved are copied in.
    """
CREATE TABLE activity (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    agent TEXT NOT NULL,
    others TEXT NOT NULL DEFAULT '[]',
    title TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '{}',
    key TEXT UNIQUE
);
CREATE INDEX activity_at ON activity(at, id);
CREATE INDEX activity_kind ON activity(kind, at, id);
CREATE TABLE activity_agents (
    agent TEXT NOT NULL,
    kind TEXT NOT NULL,
    at REAL NOT NULL,
    id INTEGER NOT NULL,
    PRIMARY KEY (agent, at, id)
);
CREATE INDEX activity_agents_kind ON activity_agents(agent, kind, at, id);
CREATE INDEX activity_agents_at ON activity_agents(at);
CREATE INDEX messages_at ON messages(created_at, id);
CREATE INDEX messages_sender_at ON messages(sender, created_at, id);
CREATE INDEX messages_recipient_at ON messages(recipient, created_at, id);
INSERT INTO activity(at, kind, agent, others, title, detail, key)
SELECT created_at, 'approval', requester, json_array(subject),
    'approval #' || id || ' asked: ' || kind || ' for ' || subject || ' (by ' || requester || ')',
    json_object('approval_id', id, 'state', 'asked'), 'approval:' || id || ':asked'
FROM approvals ORDER BY created_at, id;
INSERT INTO activity(at, kind, agent, others, title, detail, key)
SELECT resolved_at, 'approval', subject, json_array(requester),
    'approval #' || id || ' ' || state || ': ' || kind || ' for ' || subject,
    json_object('approval_id', id, 'state', state, 'resolution', coalesce(resolution, '')),
    'approval:' || id || ':resolved'
FROM approvals WHERE resolved_at IS NOT NULL ORDER BY resolved_at, id;
INSERT OR IGNORE INTO activity_agents(agent, kind, at, id) SELECT agent, kind, at, id FROM activity;
INSERT OR IGNORE INTO activity_agents(agent, kind, at, id)
SELECT json_extract(others, '$[0]'), kind, at, id FROM activity
""",
    # 10 (nodisk-logs, #14; positional, after what main has): reminders are delivered
    # whole, never spilled to a file in the agent's state/ (its host may be another
    # machine). A spilled reminder still waiting in an inbox gets its whole text back
    # from the reminders table, once; the old files stay where they are (the agent's).
    """
UPDATE messages SET body = '[reminder #' || r.id || '] ' || r.message
FROM reminders AS r
WHERE messages.sender = 'reminder' AND messages.acked_at IS NULL
  AND (messages.body LIKE '[reminder #' || r.id || '] (% characters, too long to inline) Read(%'
    OR messages.body LIKE '[reminder #' || r.id || '] (could not be written to %')
""",
    # 9 (place; positional): which agent host each agent is assigned to, whether the
    # operator pinned it there, and an `agents move` in progress (its phase, durable so a
    # coordinator that restarts mid-move resolves it: before `cleanup` it is undone).
    """
CREATE TABLE placements (
    agent TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pinned INTEGER NOT NULL DEFAULT 0,
    assigned_at REAL NOT NULL,
    move_id TEXT,
    move_from TEXT,
    move_to TEXT,
    move_phase TEXT
)
""",
    # 12 (hostrest, #14): a host credential's expiry (NULL: none), and the link epoch
    # whose lease expiry a coordinator has already handled (its agents shown ``lost``,
    # the operator told): a coordinator taking over after a failover reads it, so it
    # neither forgets the loss nor tells the operator twice.
    """
ALTER TABLE hosts ADD COLUMN expires_at REAL;
ALTER TABLE hosts ADD COLUMN lost_epoch INTEGER
""",
    # 12 (repos, #14; positional: the 12th entry, after hostrest's): a destroyed agent
    # whose host was not connected; its directories move to that host's trash when it
    # registers again.
    """
CREATE TABLE pending_trash (
    agent TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    destroyed_at REAL NOT NULL
)
""",
    # 13 (hostmisc, #14; positional: the 13th entry, after repos' 12th): the hive's own
    # values, its id first (it names the agents' system users): kept here, not in one
    # coordinator's home, so coordinators on other machines agree on it.
    """
CREATE TABLE hive_settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    set_at REAL NOT NULL
)
""",
    # 14 (#11, CPU per send): every index on ``messages`` costs each send a b-tree insert
    # and each commit a page in the WAL (measured: ~10-20 µs of CPU per row, ~100 µs of
    # commit). ``(sender, id)`` duplicated ``messages_sender_at`` (inbox and outbox now
    # walk the ``*_at`` indexes), and a send that replies to nothing no longer enters
    # ``messages_reply``.
    """
DROP INDEX messages_sender;
DROP INDEX messages_reply;
CREATE INDEX messages_reply ON messages(in_reply_to) WHERE in_reply_to IS NOT NULL
""",
    # 15 (spend; positional, after what main has): each run counted at its own cost. A
    # spend row says its claude session and what claude said the session had cost;
    # ``spend_sessions`` keeps each session's last reported totals per model, which the
    # next run of that session is differenced against. Old rows are repaired where the
    # order of an agent's runs allows (``hyperhive.store.spendrepair``).
    schema_15,
]
