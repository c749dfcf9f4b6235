"""Every store backend the suite runs against, behind one seam.

A backend is an async context manager factory ``(request, tmp_path) ->
Backend``; adding one is one line in ``BACKENDS`` (the PostgreSQL fixture
lives in ``tests/support/postgres.py``). ``Backend.open()`` opens a new
``Store`` on the same database each time, so tests can reopen it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Protocol

import psycopg
import pytest

from hyperhive.store import Store
from hyperhive.store.postgres import open_postgres
from hyperhive.store.sqlite import SqliteStore

__all__ = ["BACKENDS", "Backend", "BackendFactory", "PostgresBackend", "SqliteBackend"]


class Backend(Protocol):
    name: str

    async def open(self) -> Store:
        """A new store on this backend's database (migrated)."""
        ...

    def force_schema_version(self, version: int) -> None:
        """Record ``version`` as applied, raw: how a newer hyperhive's database looks."""
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
