"""Agents' last snapshots, on both backends: one per agent, replaced whole, kept across
a reopen, forgotten with the agent."""

from __future__ import annotations

import hashlib
import os

import pytest

from hyperhive.store.rows import SnapshotHead, StoredSnapshot
from tests.support.stores import Backend

pytestmark = pytest.mark.anyio


def snapshot(agent: str, data: bytes, host: str = "h1", at: float = 100.0) -> StoredSnapshot:
    head = SnapshotHead(
        agent=agent,
        host=host,
        taken_at=at,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        raw_bytes=len(data) * 3,
        files=2,
    )
    return StoredSnapshot(head, data)


async def test_the_last_snapshot_replaces_the_previous_and_survives_a_reopen(
    backend: Backend,
) -> None:
    first = snapshot("bob", os.urandom(300_000))  # binary, past a page: stored as is
    second = snapshot("bob", b"\x00\xffsecond", host="h2", at=200.0)
    store = await backend.open()
    try:
        assert await store.snapshots.head("bob") is None
        assert await store.snapshots.get("bob") is None
        await store.snapshots.put(first)
        await store.snapshots.put(snapshot("alice", b"alice's"))
        assert await store.snapshots.get("bob") == first
        await store.snapshots.put(second)
        assert await store.snapshots.head("bob") == second.head
    finally:
        await store.close()
    again = await backend.open()
    try:
        assert await again.snapshots.get("bob") == second
        assert (await again.snapshots.get("alice")) == snapshot("alice", b"alice's")
        await again.snapshots.forget("bob")
        assert await again.snapshots.get("bob") is None
        assert await again.snapshots.head("alice") is not None  # only bob's went
    finally:
        await again.close()
