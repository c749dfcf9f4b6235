"""The hive's own values (its id) contract, on both backends."""

from __future__ import annotations

import anyio
import pytest

from hyperhive.store import Store
from tests.support.stores import Backend

pytestmark = pytest.mark.anyio


async def test_the_first_value_kept_wins_and_survives_a_reopen(backend: Backend) -> None:
    store = await backend.open()
    try:
        assert await store.settings.get("hive_id") is None
        assert await store.settings.keep("hive_id", "abc123") == "abc123"
        # A later keep does not replace it: it is told the kept value.
        assert await store.settings.keep("hive_id", "zzz999") == "abc123"
        assert await store.settings.get("other") is None
    finally:
        await store.close()
    again = await backend.open()
    try:
        assert await again.settings.get("hive_id") == "abc123"
    finally:
        await again.close()


async def test_two_stores_keeping_at_once_agree(backend: Backend) -> None:
    # Two coordinators' first starts on one database race: both end up with one value.
    stores: list[Store] = [await backend.open(), await backend.open()]
    got: dict[int, str] = {}
    try:

        async def keep(i: int) -> None:
            got[i] = await stores[i].settings.keep("hive_id", f"cand0{i}")

        async with anyio.create_task_group() as tg:
            for i in range(2):
                tg.start_soon(keep, i)
        assert got[0] == got[1] and got[0] in {"cand00", "cand01"}
    finally:
        for s in stores:
            await s.close()
