"""Reminders spilled to files before #14 are adopted once: their whole text comes back."""

from __future__ import annotations

import time

import pytest

from hyperhive.names import REMINDER
from hyperhive.store.postgres.migrations import MIGRATIONS as PG_MIGRATIONS
from hyperhive.store.rows import FireReminder
from hyperhive.store.sqlite.schema import MIGRATIONS as SQLITE_MIGRATIONS
from tests.support.stores import Backend

pytestmark = pytest.mark.anyio


def _reminder_migration(backend: Backend) -> int:
    """The version of the migration that adopts spilled reminders (not always the last)."""
    migrations = PG_MIGRATIONS if backend.name == "postgresql" else SQLITE_MIGRATIONS
    [version] = [
        i for i, sql in enumerate(migrations, 1) if isinstance(sql, str) and "[reminder #" in sql
    ]
    return version


async def test_a_pending_spilled_reminder_gets_its_whole_text_back_once(
    backend: Backend,
) -> None:
    store = await backend.open()
    big = "a long note, " * 600
    try:
        spilled = await store.loose_ends.remind("bob", big, time.time() - 1, 50)
        cut = await store.loose_ends.remind("bob", big + "cut", time.time() - 1, 50)
        short = await store.loose_ends.remind("bob", "stand up", time.time() - 1, 50)
        read = await store.loose_ends.remind("ann", big + "read", time.time() - 1, 50)
        # As the spilling scheduler delivered them: a file named, a cut-short body, inline.
        bodies = {
            spilled: f"[reminder #{spilled}] ({len(big)} characters, too long to inline) "
            f"Read(/hive/agents/bob/state/reminders/{spilled}.md)",
            cut: f"[reminder #{cut}] (could not be written to /x/{cut}.md: disk full; "
            f"first 10 of {len(big) + 3} characters follow) a long no",
            short: f"[reminder #{short}] stand up",
            read: f"[reminder #{read}] ({len(big) + 4} characters, too long to inline) Read(/r)",
        }
        await store.schedules.fire(
            time.time(), REMINDER, [FireReminder(i, b) for i, b in bodies.items()], []
        )
        # ann already read and acked hers: her inbox's history is left as it was.
        got = await store.messages.recv("ann", 10)
        await store.messages.ack_ids("ann", [m.id for m in got.messages])
    finally:
        await store.close()

    backend.forget_schema_version(_reminder_migration(backend))
    store = await backend.open()
    try:
        bob = {
            m.body.split("]")[0]: m.body for m in (await store.messages.recv("bob", 10)).messages
        }
        assert bob[f"[reminder #{spilled}"] == f"[reminder #{spilled}] {big}"
        assert bob[f"[reminder #{cut}"] == f"[reminder #{cut}] {big}cut"
        assert bob[f"[reminder #{short}"] == f"[reminder #{short}] stand up"
        [ann] = [m for m in await store.messages.scan() if m.recipient == "ann"]
        assert ann.body == bodies[read]
    finally:
        await store.close()
