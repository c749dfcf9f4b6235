"""Two small shapes of anyio task group the agent's loops use.

:func:`sole_error` unwraps the one error a task group's body raised, for groups
whose tasks never fail themselves; :func:`first_set` waits for the first of
several events.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

__all__ = ["first_set", "sole_error"]


@asynccontextmanager
async def sole_error() -> AsyncIterator[None]:
    """A task group's body error as itself: its tasks never fail, so a group wraps one."""
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


async def first_set(*events: anyio.Event) -> None:
    """Return once any of ``events`` is set."""
    async with anyio.create_task_group() as tg:

        async def one(event: anyio.Event) -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        for event in events:
            tg.start_soon(one, event)
