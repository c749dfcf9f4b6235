"""The PostgreSQL store at start: its URL, refusals that name the cause, migrations."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import psycopg
import pytest

from hyperhive.errors import ConfigError, StorageError
from hyperhive.store.postgres import open_postgres
from hyperhive.store.postgres.migrations import MIGRATIONS, SchemaTooNew
from hyperhive.store.url import mask_url, read_url_file
from tests.support.postgres import PgCluster

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://hive:s3cret@db:5432/hive", "postgresql://hive:***@db:5432/hive"),
        (
            "postgresql://hive@db/hive?password=s3cret&x=1",
            "postgresql://hive@db/hive?password=***&x=1",
        ),
        ("host=db password='s3 cret' dbname=hive", "host=db password=*** dbname=hive"),
        ("postgresql://hive@/hive?host=/run/pg", "postgresql://hive@/hive?host=/run/pg"),
    ],
)
async def test_mask_url_hides_every_form_of_password(url: str, shown: str) -> None:
    assert mask_url(url) == shown


async def test_url_file_is_refused_unless_only_its_owner_can_read_it(tmp_path: Path) -> None:
    path = tmp_path / "store.url"
    path.write_text("# the hive's database\npostgresql://hive:pw@db/hive\n")
    path.chmod(0o640)
    with pytest.raises(ConfigError, match=r"readable by others \(mode 0640\).*chmod 600"):
        read_url_file(path)
    path.chmod(0o600)
    assert read_url_file(path) == "postgresql://hive:pw@db/hive"
    path.write_text("postgresql://a@db/x\npostgresql://b@db/y\n")
    with pytest.raises(ConfigError, match="one line"):
        read_url_file(path)
    with pytest.raises(ConfigError, match="does not exist"):
        read_url_file(tmp_path / "absent")


async def test_unreachable_database_is_refused_with_masked_url_and_reason() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://hive:hunter2@127.0.0.1:{port}/hive"
    with pytest.raises(StorageError) as err:
        await open_postgres(url)
    text = str(err.value)
    assert f"postgresql://hive:***@127.0.0.1:{port}/hive" in text
    assert "refused" in text.lower()
    assert "hunter2" not in text


async def test_wrong_password_is_refused_without_echoing_it(pg_cluster: PgCluster) -> None:
    name = pg_cluster.create_database()
    url = pg_cluster.url(name, tcp=True).replace(pg_cluster.password, "not-the-password")
    with pytest.raises(StorageError) as err:
        await open_postgres(url)
    assert "password authentication failed" in str(err.value)
    assert "not-the-password" not in str(err.value)
    assert pg_cluster.password not in str(err.value)


async def test_tcp_without_a_password_is_refused(pg_cluster: PgCluster) -> None:
    name = pg_cluster.create_database()
    with pytest.raises(StorageError, match="password"):
        await open_postgres(
            f"postgresql://{pg_cluster.superuser}@127.0.0.1:{pg_cluster.port}/{name}"
        )


async def test_migrations_apply_once_even_when_two_coordinators_start_together(
    pg_url: str,
) -> None:
    first, second = await asyncio.gather(open_postgres(pg_url), open_postgres(pg_url))
    try:
        assert first.schema_version == second.schema_version == len(MIGRATIONS)
    finally:
        await first.close()
        await second.close()
    with psycopg.connect(pg_url) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY 1")]
    assert versions == list(range(1, len(MIGRATIONS) + 1))
    again = await open_postgres(pg_url)
    await again.close()


async def test_a_schema_newer_than_the_code_is_refused_with_both_versions(pg_url: str) -> None:
    store = await open_postgres(pg_url)
    await store.messages.send("a", "b", "kept")
    await store.close()
    newer = len(MIGRATIONS) + 7
    with psycopg.connect(pg_url) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (%s, 0)", (newer,))
    with pytest.raises(SchemaTooNew) as err:
        await open_postgres(pg_url)
    assert f"schema version {newer}" in str(err.value)
    assert f"up to {len(MIGRATIONS)}" in str(err.value)
    with psycopg.connect(pg_url) as conn:  # nothing was touched
        assert conn.execute("SELECT body FROM messages").fetchall() == [("kept",)]


async def test_the_location_shown_never_carries_the_password(pg_cluster: PgCluster) -> None:
    store = await open_postgres(pg_cluster.url(pg_cluster.create_database(), tcp=True))
    try:
        assert pg_cluster.password not in store.location
        assert ":***@127.0.0.1" in store.location
    finally:
        await store.close()


def test_cluster_socket_dir_is_private(pg_cluster: PgCluster) -> None:
    st = os.stat(pg_cluster.sockdir)
    assert st.st_mode & 0o077 == 0
