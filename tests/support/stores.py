"""Every store backend the suite runs against, behind one seam.

A backend is an async context manager factory ``(request, tmp_path) ->
Backend``; adding one is one line in ``BACKENDS`` (the PostgreSQL fixture
lives in ``tests/support/postgres.py``). ``Backend.open()`` opens a new
``Store`` on the same database each time, so tests can reopen it.

Which store a test's *hive* (a whole coordinator) runs on is chosen in
``tests/support/store_switch.py``; ``read_hive`` reads whichever store the
hive's ``hive.toml`` (or ``HIVE_STORE_URL``) names.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import anyio
import psycopg
import pytest

from hyperhive.config import HivePaths, load_hive_config
from hyperhive.store import Store
from hyperhive.store.postgres import open_postgres
from hyperhive.store.postgres.migrations import MIGRATIONS as PG_MIGRATIONS
from hyperhive.store.postgres.migrations import migrate as pg_migrate
from hyperhive.store.rows import (
    AgentState,
    ApprovalRow,
    MessageRow,
    QuestionRow,
    ReminderRow,
    ScheduleRow,
    TodoRow,
)
from hyperhive.store.sqlite import SqliteStore
from hyperhive.store.sqlite.schema import MIGRATIONS as SQLITE_MIGRATIONS

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendFactory",
    "HiveRows",
    "PostgresBackend",
    "SqliteBackend",
    "open_hive_store",
    "read_hive",
    "read_hive_sync",
]


class Backend(Protocol):
    name: str

    async def open(self) -> Store:
        """A new store on this backend's database (migrated)."""
        ...

    def force_schema_version(self, version: int) -> None:
        """Record ``version`` as applied, raw: how a newer hyperhive's database looks."""
        ...

    def forget_schema_version(self, version: int) -> None:
        """Drop ``version``'s record, raw: the next open applies that migration again
        (how a database from before it looks, with today's rows in it)."""
        ...

    async def create_at(self, version: int) -> None:
        """A new database at schema ``version`` (migrations 1..version), as an older
        hyperhive left it: the next open applies the rest."""
        ...

    def execute(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        """Run ``sql`` (``?`` placeholders) raw, once per row: rows as old code wrote them."""
        ...


class SqliteBackend:
    name = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path

    async def open(self) -> Store:
        return await SqliteStore.open(self.path)

    def force_schema_version(self, version: int) -> None:
        with sqlite3.connect(self.path) as conn:
            conn.execute(
                "INSERT INTO schema_migrations(version, applied_at) VALUES (?, 0)", (version,)
            )
        conn.close()

    def forget_schema_version(self, version: int) -> None:
        with sqlite3.connect(self.path) as conn:
            conn.execute("DELETE FROM schema_migrations WHERE version = ?", (version,))
        conn.close()

    async def create_at(self, version: int) -> None:
        with sqlite3.connect(self.path) as conn:
            conn.execute(
                "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at REAL)"
            )
            for number, step in enumerate(SQLITE_MIGRATIONS[:version], start=1):
                if callable(step):
                    step(conn)
                else:
                    for statement in step.split(";\n"):
                        if statement.strip():
                            conn.execute(statement)
                conn.execute("INSERT INTO schema_migrations VALUES (?, 0)", (number,))
        conn.close()

    def execute(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        with sqlite3.connect(self.path) as conn:
            conn.executemany(sql, rows)
        conn.close()


@asynccontextmanager
async def sqlite_backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    yield SqliteBackend(tmp_path / "hive.db")


class PostgresBackend:
    name = "postgresql"

    def __init__(self, url: str) -> None:
        self.url = url

    async def open(self) -> Store:
        return await open_postgres(self.url)

    def force_schema_version(self, version: int) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO schema_migrations(version, applied_at) VALUES (%s, 0)", (version,)
            )

    def forget_schema_version(self, version: int) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("DELETE FROM schema_migrations WHERE version = %s", (version,))

    async def create_at(self, version: int) -> None:
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            await pg_migrate(conn, PG_MIGRATIONS[:version])

    def execute(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn, conn.cursor() as cur:
            cur.executemany(sql.replace("?", "%s"), rows)


@asynccontextmanager
async def postgres_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Backend]:
    """A fresh database of the session's cluster (``tests/support/postgres.py``)."""
    yield PostgresBackend(request.getfixturevalue("pg_url"))


BackendFactory = Callable[[pytest.FixtureRequest, Path], AbstractAsyncContextManager[Backend]]

BACKENDS: dict[str, BackendFactory] = {
    "sqlite": sqlite_backend,
    "postgresql": postgres_backend,
}


@dataclass(frozen=True)
class HiveRows:
    """Everything an audit reads from a hive's store, as typed rows."""

    messages: list[MessageRow]
    reminders: list[ReminderRow]
    todos: list[TodoRow]
    approvals: list[ApprovalRow]
    questions: list[QuestionRow]
    schedules: list[ScheduleRow]
    agents: list[AgentState]
    topology: dict[str, str | None]
    configs: dict[str, str]  # each agent's applied config text
    # SQLite's ``PRAGMA integrity_check`` ("ok" when sound). None on PostgreSQL: it has
    # no cheap equivalent, and its own WAL replay is what makes a kill -9 safe there.
    integrity: str | None

    def message_map(self) -> dict[int, MessageRow]:
        return {m.id: m for m in self.messages}


async def open_hive_store(paths: HivePaths, *, readonly: bool = False) -> Store:
    """The store the hive's ``hive.toml`` (or ``HIVE_STORE_URL``) names, as its
    coordinator would open it: for a test that seeds or inspects a hive's state
    beside (or between) coordinator runs, on whichever backend the hive runs.
    ``readonly`` holds on SQLite; PostgreSQL has no read-only open."""
    url = load_hive_config(paths.home).store
    if url is None:
        return await SqliteStore.open(paths.db, readonly=readonly)
    return await open_postgres(url)


async def read_hive(paths: HivePaths) -> HiveRows:
    """The hive's rows, read through the store its ``hive.toml`` names (``store``,
    ``store_url_file`` or ``HIVE_STORE_URL``, as the coordinator reads them).

    Safe beside a running coordinator: SQLite is opened read-only; on PostgreSQL
    the open's migration step finds nothing to do and only reads follow.
    """
    store = await open_hive_store(paths, readonly=True)
    try:
        messages: list[MessageRow] = []
        while page := await store.messages.scan(messages[-1].id if messages else 0, 5000):
            messages += page
        return HiveRows(
            messages=messages,
            reminders=await store.loose_ends.reminders(include_fired=True),
            todos=await store.loose_ends.todos(),
            approvals=await store.approvals.list(pending_only=False),
            questions=await store.loose_ends.questions(open_only=False),
            schedules=await store.schedules.all(),
            agents=await store.agents.all(),
            topology=await store.topology.get(),
            configs=await store.meta.configs(),
            integrity=(await store.integrity_check() if isinstance(store, SqliteStore) else None),
        )
    finally:
        await store.close()


def read_hive_sync(paths: HivePaths) -> HiveRows:
    """:func:`read_hive` for synchronous code, even code called from an event loop.

    It runs on a thread of its own with its own loop, and blocks the caller
    until done, as a plain file read would.
    """
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, read_hive, paths).result()
