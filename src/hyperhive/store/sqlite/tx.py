"""``hive.db``'s connection and what an operation sees of its transaction.

:class:`Tx` is all an operation touches (it may run twice: a failed batch is
replayed); :func:`connect` opens the file as the engine or a reader needs it;
:func:`storage_error` turns what SQLite raised into the error a caller reads.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from hyperhive.errors import HiveError, StorageError

__all__ = ["Params", "Tx", "connect", "savepoint", "storage_error"]

# The engine's own logger: what an operator filters hive.db's records by stays one name.
log = logging.getLogger("hyperhive.store.sqlite.engine")

Params = Sequence[object]


class Tx:
    """One operation's view of the open transaction, and who it woke."""

    __slots__ = ("changed", "conn")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.changed: set[str] = set()

    def execute(self, sql: str, params: Params = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self.conn.execute(sql, params).fetchone()
        return row

    def all(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        return self.conn.execute(sql, params).fetchall()

    def insert(self, sql: str, params: Params = ()) -> int:
        rowid = self.conn.execute(sql, params).lastrowid
        assert rowid is not None
        return rowid

    def wake(self, agent: str) -> None:
        """Report ``agent`` to the store's subscribers once this commits."""
        self.changed.add(agent)


@contextmanager
def savepoint(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("SAVEPOINT op")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK TO op")
        conn.execute("RELEASE op")
        raise
    conn.execute("RELEASE op")


def connect(path: Path, readonly: bool) -> sqlite3.Connection:
    if readonly:
        conn = sqlite3.connect(
            f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
        )
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA busy_timeout=30000")
        return conn
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


def storage_error(exc: Exception) -> BaseException:
    if isinstance(exc, HiveError):
        return exc
    if isinstance(exc, sqlite3.Error):
        text = str(exc)
        hint = ""
        if "full" in text or "disk I/O" in text:
            hint = "; free disk space under HIVE_HOME and retry"
        log.error("hive.db write failed: %s", text)
        return StorageError(f"the hive database refused the write ({text}){hint}")
    return exc
