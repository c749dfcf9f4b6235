"""Telling the coordinator that a bash task or subagent started or finished (the feed).

The coordinator does not see a task start (the agent's tool call is served on
its host), so the host reports it over the agent's own socket: the agent is
the socket's. Best effort and brief: the dashboard's feed is worth a try, never
a stalled tool call.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any, Literal, Protocol

from hyperhive.errors import HiveError
from hyperhive.protocol import ReportActivityReq, Req

__all__ = ["ActivitySink", "CoordinatorActivity", "Phase"]

log = logging.getLogger(__name__)

# "ran": a task that started and ended inside its inline window, told once.
Phase = Literal["started", "finished", "ran"]
CALL_TIMEOUT = 3.0


class ActivitySink(Protocol):
    async def report(
        self,
        phase: Phase,
        ref: str,
        summary: str,
        *,
        status: str | None = None,
        exit_code: int | None = None,
    ) -> None: ...


class _Agent(Protocol):
    async def call(self, request: Req[Any], within: float = ...) -> Any: ...


class CoordinatorActivity:
    """An :class:`ActivitySink` for one kind (``bash`` or ``subagent``)."""

    def __init__(self, agent: _Agent, kind: Literal["bash", "subagent"]) -> None:
        self.agent = agent
        self.kind = kind

    async def report(
        self,
        phase: Phase,
        ref: str,
        summary: str,
        *,
        status: str | None = None,
        exit_code: int | None = None,
    ) -> None:
        request = ReportActivityReq(
            cmd="report_activity",
            kind=self.kind,
            phase=phase,
            ref=ref[:128],
            summary=summary[:300],
            status=status,
            exit_code=exit_code,
            event_id=secrets.token_hex(12),
        )
        try:
            await self.agent.call(request, CALL_TIMEOUT)
        except HiveError as exc:
            log.info("the feed misses %s %s %s: %s", self.kind, ref, phase, exc)
