"""The coordinator's task group, for work that outlives the request that began it."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from anyio.abc import TaskGroup

from hyperhive.errors import Unavailable

__all__ = ["Background"]


class Background:
    """Bound to the lifespan's task group once it runs; services hold this, not the group."""

    def __init__(self) -> None:
        self._tg: TaskGroup | None = None

    def bind(self, tg: TaskGroup | None) -> None:
        self._tg = tg

    @property
    def group(self) -> TaskGroup:
        if self._tg is None:
            raise Unavailable("the coordinator is not running (no task group to start work in)")
        return self._tg

    def start_soon(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        self.group.start_soon(fn, *args)
