"""The PostgreSQL backend of the store: for a hive that outgrows one machine.

psycopg 3 (async) over a ``psycopg_pool`` pool; numbered migrations numbered
like SQLite's; NOTIFY in the transaction that wakes an agent, LISTEN plus a
sweep after each reconnect; a lost database answers ``Unavailable``.
"""

from __future__ import annotations

from hyperhive.store.postgres.store import PostgresStore, open_postgres

__all__ = ["PostgresStore", "open_postgres"]
