"""MetaCache: kept until forgotten; an answer fetched across a change is not kept."""

from __future__ import annotations

import anyio
import pytest

from hyperhive.agent.metacache import MetaCache
from hyperhive.wirebase import AgentMeta

pytestmark = pytest.mark.anyio


def _meta(status: str) -> AgentMeta:
    return AgentMeta(
        name="alice",
        hive_name="h",
        hyperhive_rev="0",
        running=True,
        status_text=status,
        status_set_at=None,
        parent=None,
    )


async def test_kept_until_forgotten() -> None:
    cache, fetched = MetaCache(), []

    async def fetch() -> AgentMeta:
        fetched.append(1)
        return _meta(f"v{len(fetched)}")

    assert (await cache.get(fetch)).status_text == "v1"
    assert (await cache.get(fetch)).status_text == "v1"
    assert len(fetched) == 1
    cache.forget()
    assert (await cache.get(fetch)).status_text == "v2"
    assert len(fetched) == 2


async def test_an_answer_fetched_across_a_change_is_used_once_not_kept() -> None:
    cache = MetaCache()
    in_flight, release = anyio.Event(), anyio.Event()
    answers = iter([_meta("before the change"), _meta("after the change")])

    async def slow_fetch() -> AgentMeta:
        in_flight.set()
        await release.wait()
        return next(answers)

    got: list[AgentMeta] = []
    async with anyio.create_task_group() as tg:

        async def caller() -> None:
            got.append(await cache.get(slow_fetch))

        tg.start_soon(caller)
        await in_flight.wait()
        cache.forget()  # the push arrives while the answer is on its way
        release.set()
    assert got[0].status_text == "before the change"
    assert (await cache.get(slow_fetch)).status_text == "after the change"
