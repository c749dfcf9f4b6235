"""Group-committed sends on PostgreSQL: a bad send in a batch fails alone, the rest land."""

from __future__ import annotations

import anyio
import pytest

from hyperhive.errors import NotFound
from hyperhive.store.postgres import open_postgres

pytestmark = pytest.mark.anyio


async def test_a_bad_reply_in_a_batch_fails_alone(pg_url: str) -> None:
    store = await open_postgres(pg_url)
    try:
        root = await store.messages.send("alice", "bob", "root")
        seen: list[str] = []
        store.on_change(seen.append)
        landed: dict[int, int] = {}
        refused: list[int] = []

        async def send(i: int) -> None:
            reply = 999_999 if i % 7 == 3 else root
            try:
                landed[i] = await store.messages.send("alice", f"r{i % 3}", f"m{i}", reply)
            except NotFound:
                refused.append(i)

        async with anyio.create_task_group() as tg:  # all queued before the first commit
            for i in range(40):
                tg.start_soon(send, i)

        assert sorted(refused) == [i for i in range(40) if i % 7 == 3]
        assert len(set(landed.values())) == len(landed) == 40 - len(refused)
        rows = {m.id: m for m in await store.messages.scan(root)}
        assert set(rows) == set(landed.values())
        for i, msg_id in landed.items():
            assert rows[msg_id].body == f"m{i}" and rows[msg_id].recipient == f"r{i % 3}"
            assert rows[msg_id].in_reply_to == root
        assert set(seen) == {"r0", "r1", "r2"}
    finally:
        await store.close()
