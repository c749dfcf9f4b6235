"""Every store backend the suite runs against, behind one seam.

A backend is an async context manager factory ``(request, tmp_path) ->
Backend``; adding one is one line in ``BACKENDS`` (the PostgreSQL fixture
lives in ``tests/support/postgres.py``). ``Backend.open()`` opens a new
``Store`` on the same database each time, so tests can reopen it.

Suites that run a whole coordinator take the ``hive_store_url`` fixture
instead (parametrized over both backends) and hand it to ``seed_home``;
``read_hive`` reads whichever store the hive's ``hive.toml`` names.

The switch ``HH_TEST_STORE=sqlite|postgres`` (read here, nowhere else) picks
the store of every hive the suite starts: ``hive_store_url`` keeps only that
backend, and with ``postgres`` every other test gets ``HIVE_STORE_URL`` set to
a fresh database of the session's cluster, so every coordinator it starts, in
process or as ``hivectl serve``/``up``, runs on PostgreSQL. Unset: the
parametrized suites run on both, everything else on SQLite. Tests that are
inherently SQLite (a corrupt ``hive.db``, its file permissions) carry
``@pytest.mark.sqlite_only``; tests that name their own database (``pg_url``,
``pg_private_cluster``) keep it.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import anyio
import psycopg
import pytest

from hyperhive.config import STORE_URL_ENV, HivePaths, load_hive_config
from hyperhive.store import Store
from hyperhive.store.postgres import open_postgres
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

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendFactory",
    "STORE_SWITCH_ENV",
    "HiveRows",
    "PostgresBackend",
    "SqliteBackend",
    "hive_store_url",
    "read_hive",
    "read_hive_sync",
    "store_switch",
]


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


STORE_SWITCH_ENV = "HH_TEST_STORE"
_SWITCH_VALUES = {"sqlite": "sqlite", "postgres": "postgresql", "postgresql": "postgresql"}
# Fixtures through which a test chooses its store itself: the switch leaves it alone.
_OWN_STORE_FIXTURES = frozenset({"hive_store_url", "pg_url", "pg_private_cluster", "backend"})
# Suites that never start a hive (pure rules; the store's contract tests, which run on
# every backend anyway): no database for them, a fresh one costs ~0.1-0.3 s.
_HIVELESS_SUITES = frozenset({"unit", "store"})
_TESTS_ROOT = Path(__file__).resolve().parents[1]


def store_switch() -> str | None:
    """The backend ``HH_TEST_STORE`` names (a ``BACKENDS`` key), or None when unset."""
    raw = os.environ.get(STORE_SWITCH_ENV, "").strip().lower()
    if not raw:
        return None
    if raw not in _SWITCH_VALUES:
        raise pytest.UsageError(
            f"{STORE_SWITCH_ENV}={raw!r}: expected one of sqlite, postgres (or unset for both)"
        )
    return _SWITCH_VALUES[raw]


def _hive_store_params() -> list[str]:
    switch = store_switch()
    return [switch] if switch else list(BACKENDS)


@pytest.fixture(autouse=True)
def _hive_store_switch(request: pytest.FixtureRequest) -> Iterator[None]:
    """With ``HH_TEST_STORE=postgres``: ``HIVE_STORE_URL`` (which beats hive.toml, in
    this process and every ``hivectl`` it starts) names a fresh database for the test.

    Afterwards no ``hive.db`` may exist under the test's ``tmp_path``: one would be a
    hive that slipped past the switch (an environment built from scratch) onto SQLite.
    """
    if (
        store_switch() != "postgresql"
        or request.node.get_closest_marker("sqlite_only")
        or _OWN_STORE_FIXTURES & set(request.fixturenames)
        or request.node.path.relative_to(_TESTS_ROOT).parts[0] in _HIVELESS_SUITES
    ):
        if STORE_URL_ENV in os.environ:
            # The developer's own hive's database is no place for a test's hive.
            request.getfixturevalue("monkeypatch").delenv(STORE_URL_ENV)
        yield
        return
    request.getfixturevalue("monkeypatch").setenv(STORE_URL_ENV, request.getfixturevalue("pg_url"))
    # Asked for here, before the test, so it is torn down after this check.
    tmp_path: Path | None = (
        request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    )
    yield
    if tmp_path is not None:
        strays = sorted(str(p) for p in tmp_path.rglob("hive.db"))
        if strays:
            pytest.fail(
                f"{STORE_SWITCH_ENV}=postgres, yet a hive ran on SQLite: {', '.join(strays)} "
                "(pass the test's environment through, or mark it sqlite_only)"
            )


@pytest.fixture(params=_hive_store_params())
def hive_store_url(request: pytest.FixtureRequest) -> str | None:
    """The ``store`` a seeded hive uses: ``None`` (SQLite in its home) or a fresh
    PostgreSQL database of the session's cluster. Pass it to ``seed_home``."""
    if request.param == "sqlite":
        return None
    url: str = request.getfixturevalue("pg_url")
    return url


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


async def read_hive(paths: HivePaths) -> HiveRows:
    """The hive's rows, read through the store its ``hive.toml`` names (``store``,
    ``store_url_file`` or ``HIVE_STORE_URL``, as the coordinator reads them).

    Safe beside a running coordinator: SQLite is opened read-only; on PostgreSQL
    the open's migration step finds nothing to do and only reads follow.
    """
    url = load_hive_config(paths.home).store
    store: Store
    if url is None:
        store = await SqliteStore.open(paths.db, readonly=True)
    else:
        store = await open_postgres(url)
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
