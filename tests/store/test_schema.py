"""Schema contract: migrations are numbered, and a newer database is refused."""

from __future__ import annotations

import pytest

from hyperhive.errors import StorageError
from tests.support.stores import Backend

pytestmark = pytest.mark.anyio


async def test_a_schema_newer_than_the_code_is_refused_with_both_versions(
    backend: Backend,
) -> None:
    store = await backend.open()
    known = store.schema_version
    await store.messages.send("alice", "bob", "kept")
    await store.close()
    assert known >= 2
    backend.force_schema_version(known + 5)
    with pytest.raises(StorageError) as caught:
        await backend.open()
    assert f"schema version {known + 5}" in caught.value.message
    assert f"up to {known}" in caught.value.message


async def test_reopening_keeps_the_schema_and_the_rows(backend: Backend) -> None:
    store = await backend.open()
    version = store.schema_version
    msg = await store.messages.send("alice", "bob", "kept")
    await store.close()
    store = await backend.open()
    try:
        assert store.schema_version == version
        got = await store.messages.get(msg)
        assert got is not None and got.body == "kept"
    finally:
        await store.close()
