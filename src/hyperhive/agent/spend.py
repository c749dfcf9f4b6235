"""Reporting what a subagent run cost to the coordinator, counted to its agent.

The report goes over the agent's own socket (identity = the socket), so a
subagent's spend lands on the agent that ran it. Each report carries the
run's id: retried while the coordinator is away, it still counts once. A
subagent's ``continue`` resumes its claude session, so like a turn's, its
report is the session's totals so far, and the coordinator counts the run's
own share (:mod:`hyperhive.runcost`).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Protocol

import anyio

from hyperhive.agent.stream import ResultEvent
from hyperhive.agent.turnreport import session_totals
from hyperhive.errors import Unavailable
from hyperhive.protocol import ModelSpend, RecordSpendReq, Req, RunSpend, SpendRecorded

__all__ = ["CoordinatorSpend", "SpendSink", "subagent_spend"]

log = logging.getLogger(__name__)

CALL_TIMEOUT = 10.0
RETRY_FOR = 120.0


class SpendSink(Protocol):
    """Where a subsystem's claude runs are counted (the coordinator, in production)."""

    async def record(self, spend: RunSpend) -> ModelSpend:
        """Count the run; what it was counted at (its own figures)."""
        ...


class _Agent(Protocol):
    async def call(self, request: Req[Any], within: float = ...) -> Any: ...


def subagent_spend(result: ResultEvent) -> RunSpend:
    """A subagent run's report from its ``result`` event, under a fresh run id."""
    return RunSpend(
        run_id=uuid.uuid4().hex,
        kind="subagent",
        session_id=result.session_id,
        session_totals={m: ModelSpend.of(f) for m, f in session_totals(result).items()},
    )


class CoordinatorSpend:
    """A :class:`SpendSink` reporting on the agent's own socket, retrying a while."""

    def __init__(self, agent: _Agent) -> None:
        self.agent = agent

    async def record(self, spend: RunSpend) -> ModelSpend:
        delay = 0.2
        deadline = anyio.current_time() + RETRY_FOR
        while True:
            try:
                recorded: SpendRecorded = await self.agent.call(
                    RecordSpendReq(cmd="record_spend", spend=spend), CALL_TIMEOUT
                )
                return recorded.spend
            except Unavailable:
                if anyio.current_time() + delay > deadline:
                    raise
                await anyio.sleep(delay)
                delay = min(delay * 2, 2.0)
