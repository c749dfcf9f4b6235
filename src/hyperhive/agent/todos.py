"""Keyed todos an agent-host subsystem files on its agent (bash tasks, subagents).

A todo goes to the coordinator over the agent's own socket, so it lands on
that agent (identity = the socket) and wakes its turn
(:meth:`~hyperhive.agent.connection.AgentConnection.call` picks the connection).
"""

from __future__ import annotations

import itertools
from typing import Any, Protocol

import anyio

from hyperhive.errors import Unavailable
from hyperhive.protocol import Req, TodoClearReq, TodoUpsertReq

__all__ = ["CoordinatorTodos", "TodoSink"]

CALL_TIMEOUT = 10.0
RETRY_FOR = 120.0


class TodoSink(Protocol):
    """Where a subsystem's keyed todos go (the coordinator, in production)."""

    async def upsert(self, key: str, body: str, *, wake: bool = True) -> None: ...

    async def clear(self, key: str) -> None: ...


class _Agent(Protocol):
    async def call(self, request: Req[Any], within: float = ...) -> Any: ...


class CoordinatorTodos:
    """A :class:`TodoSink` filing the agent's todos under ``subsystem``."""

    def __init__(self, agent: _Agent, subsystem: str) -> None:
        self.agent = agent
        self.subsystem = subsystem
        self._seq = itertools.count(1)
        self._latest: dict[str, int] = {}

    async def _call(self, key: str, request: Req[Any]) -> None:
        """Deliver, retrying while the coordinator is away (a restart takes seconds).

        A todo dropped here would leave the agent with a stale "running" or no
        completion at all, so it is retried with backoff for a while. A retry
        that a later operation on the same key has overtaken is dropped, so a
        late "running" can never land on top of the completion.
        """
        seq = self._latest[key] = next(self._seq)
        delay = 0.2
        deadline = anyio.current_time() + RETRY_FOR
        while self._latest.get(key) == seq:
            try:
                await self.agent.call(request, CALL_TIMEOUT)
                return
            except Unavailable:
                if anyio.current_time() + delay > deadline:
                    raise
                await anyio.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def upsert(self, key: str, body: str, *, wake: bool = True) -> None:
        await self._call(
            key,
            TodoUpsertReq(
                cmd="todo_upsert", subsystem=self.subsystem, key=key, body=body, wake=wake
            ),
        )

    async def clear(self, key: str) -> None:
        await self._call(key, TodoClearReq(cmd="todo_clear", subsystem=self.subsystem, key=key))
