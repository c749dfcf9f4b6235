"""Reporting what a subagent run cost to the coordinator, counted to its agent.

The report goes over the agent's own socket (identity = the socket), so a
subagent's spend lands on the agent that ran it. Each report carries the
run's id: retried while the coordinator is away, it still counts once.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Protocol

import anyio

from hyperhive.agent.stream import ResultEvent
from hyperhive.errors import Unavailable
from hyperhive.protocol import RecordSpendReq, Req, RunSpend

__all__ = ["CoordinatorSpend", "SpendSink", "subagent_spend"]

log = logging.getLogger(__name__)

CALL_TIMEOUT = 10.0
RETRY_FOR = 120.0


class SpendSink(Protocol):
    """Where a subsystem's claude runs are counted (the coordinator, in production)."""

    async def record(self, spend: RunSpend) -> None: ...


class _Agent(Protocol):
    async def call(self, request: Req[Any], within: float = ...) -> Any: ...


def subagent_spend(result: ResultEvent) -> RunSpend:
    """A subagent run's spend from its ``result`` event, under a fresh run id."""
    usage = result.usage
    return RunSpend(
        run_id=uuid.uuid4().hex,
        kind="subagent",
        cost_usd=max(0.0, result.total_cost_usd),
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_input_tokens,
        cache_creation_tokens=usage.cache_creation_input_tokens,
    )


class CoordinatorSpend:
    """A :class:`SpendSink` reporting on the agent's own socket, retrying a while."""

    def __init__(self, agent: _Agent) -> None:
        self.agent = agent

    async def record(self, spend: RunSpend) -> None:
        delay = 0.2
        deadline = anyio.current_time() + RETRY_FOR
        while True:
            try:
                await self.agent.call(RecordSpendReq(cmd="record_spend", spend=spend), CALL_TIMEOUT)
                return
            except Unavailable:
                if anyio.current_time() + delay > deadline:
                    raise
                await anyio.sleep(delay)
                delay = min(delay * 2, 2.0)
