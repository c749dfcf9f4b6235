"""``hive.db``'s schema: the numbered migrations applied in order, each recorded."""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

from hyperhive.errors import StorageError
from hyperhive.store.sqlite.schema import MIGRATIONS

__all__ = ["migrate", "refuse_newer"]

# The engine's own logger: what an operator filters hive.db's records by stays one name.
log = logging.getLogger("hyperhive.store.sqlite.engine")


def refuse_newer(done: set[int], path: Path) -> None:
    known = len(MIGRATIONS)
    if done and max(done) > known:
        raise StorageError(
            f"{path} is at schema version {max(done)}, newer than this hyperhive "
            f"(it knows schema versions up to {known}); run the hyperhive that wrote it, "
            "or upgrade this one"
        )


def migrate(conn: sqlite3.Connection, path: Path) -> int:
    """Apply every numbered migration not yet recorded; return the version.

    A database already past the newest migration this code knows is refused:
    running old code on it could drop data the newer schema relies on.
    """
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        "version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
    known = len(MIGRATIONS)
    refuse_newer(done, path)
    for version, sql in enumerate(MIGRATIONS, start=1):
        if version in done:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            if callable(sql):
                sql(conn)
            else:
                for statement in sql.split(";\n"):
                    if statement.strip():
                        conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations(version, applied_at) VALUES (?, ?)",
                (version, time.time()),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        log.info("hive.db migrated to schema %d", version)
    return known
