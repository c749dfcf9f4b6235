"""SQLite-only store behaviour: upgrading a shipped hive.db, refusing a broken file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from hyperhive.errors import ConfigError, StorageError, Unavailable
from hyperhive.store import mask_url, open_store
from hyperhive.store.sqlite import SqliteStore
from hyperhive.store.sqlite.schema import MIGRATIONS

pytestmark = pytest.mark.anyio


def _schema_one_db(path: Path) -> None:
    """A hive.db exactly as hyperhive shipped it before the store package."""
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    conn.executescript(MIGRATIONS[0])
    conn.execute("INSERT INTO schema_migrations VALUES (1, 0)")
    conn.execute(
        "INSERT INTO messages(sender, recipient, body, created_at) VALUES ('a', 'b', 'old', 1)"
    )
    conn.commit()
    conn.close()


async def test_a_shipped_schema_one_database_is_upgraded_in_place(tmp_path: Path) -> None:
    _schema_one_db(tmp_path / "hive.db")
    store = await open_store(tmp_path)
    try:
        assert store.schema_version == len(MIGRATIONS)
        [old] = await store.messages.scan()
        assert (old.sender, old.body) == ("a", "old")
        await store.topology.set({"b": None}, "works at the new schema")
    finally:
        await store.close()


async def test_a_file_that_is_not_a_database_is_refused_with_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "hive.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StorageError, match="move it aside"):
        await SqliteStore.open(tmp_path / "hive.db")


async def test_open_store_without_a_url_is_sqlite_in_the_home(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    try:
        assert isinstance(store, SqliteStore)
        assert store.location == str(tmp_path / "hive.db")
        await store.messages.send("a", "b", "x")
    finally:
        await store.close()
    assert (tmp_path / "hive.db").is_file()


async def test_an_unknown_store_url_is_refused_with_the_password_masked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'mysql://hive:\*\*\*@db:5/x' is not understood"):
        await open_store(tmp_path, "mysql://hive:secret@db:5/x")
    assert not (tmp_path / "hive.db").exists()
    assert mask_url("postgresql://u:pw@h/db") == "postgresql://u:***@h/db"
    assert mask_url("postgresql://u@h/db") == "postgresql://u@h/db"


async def test_a_read_only_store_reads_beside_the_writer_and_cannot_write(tmp_path: Path) -> None:
    writer = await SqliteStore.open(tmp_path / "hive.db")
    reader = await SqliteStore.open(tmp_path / "hive.db", readonly=True)
    try:
        sent = await writer.messages.send("a", "b", "seen by the reader")
        assert [m.id for m in await reader.messages.scan()] == [sent]
        assert reader.schema_version == writer.schema_version
        with pytest.raises(StorageError, match="readonly"):
            await reader.messages.send("a", "b", "refused")
        assert await reader.integrity_check() == "ok"
        assert [m.body for m in await writer.messages.scan()] == ["seen by the reader"]
    finally:
        await reader.close()
        await writer.close()


async def test_a_closed_store_refuses_work_instead_of_leaving_it_waiting(tmp_path: Path) -> None:
    # A host registering while the coordinator stopped waited forever on a closed store.
    store = await open_store(tmp_path)
    await store.topology.set({"b": None}, "before the close")
    await store.close()
    with pytest.raises(Unavailable, match="closed"):
        await store.messages.scan()
