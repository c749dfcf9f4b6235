"""The activity log's writer: what the hive did, told where it happens.

Each event the dashboard's feed shows (a turn with its cost, a spawn, a
crash, a bash task or subagent started or finished, a budget notice, an
approval asked or resolved, a question to the operator and its answer) is
one row in the store's activity log, written by the coordinator from what it
already knows (the socket a report came in on names the agent). After the
commit, an ``activity`` bus event lets the dashboard repaint its feed live.

Recording never fails the action it reports: the action has happened.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from hyperhive.core.notify import EventBus
from hyperhive.errors import HiveError
from hyperhive.store import Store
from hyperhive.store.rows import SpendEntry

__all__ = ["KINDS", "PRUNE_EVERY", "ActivityLog", "quote", "turn_title"]

log = logging.getLogger(__name__)

PRUNE_EVERY = 3600.0  # the log is bounded by age (hive.toml activity_keep_days)

#: Every kind of row the log holds (messages are their own table; the feed adds them).
KINDS = (
    "turn",
    "approval",
    "spawn",
    "destroy",
    "reparent",
    "crash",
    "needs_login",
    "bash",
    "subagent",
    "budget",
    "question",
    "answer",
)

TITLE_TEXT = 160  # how much of a question or answer a title quotes (the inbox has it whole)


def quote(text: str, limit: int = TITLE_TEXT) -> str:
    """``text`` on one line, cut to ``limit`` characters with a mark where it was cut."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def turn_title(agent: str, outcome: str, spent: SpendEntry | None) -> str:
    run = "compaction" if spent is not None and spent.kind == "compaction" else "turn"
    cost = f" · ${spent.cost_usd:.4f}" if spent is not None else ""
    return f"{agent}: {run} {outcome}{cost}"


class ActivityLog:
    def __init__(self, store: Store, bus: EventBus) -> None:
        self.store = store
        self.bus = bus

    async def record(
        self,
        kind: str,
        agent: str,
        title: str,
        *,
        others: Sequence[str] = (),
        detail: Mapping[str, Any] | None = None,
        key: str | None = None,
    ) -> None:
        try:
            row = await self.store.activity.record(
                kind, agent, title, others=others, detail=detail, key=key
            )
        except HiveError:
            log.warning("could not record %s activity of %s: %s", kind, agent, title, exc_info=True)
            return
        if row is not None:
            self.bus.emit("activity", activity_kind=kind, agent=agent, id=row.id)

    async def turn(
        self, agent: str, outcome: str, run_id: str | None, spent: SpendEntry | None
    ) -> None:
        """One event per claude run, with what it was counted at: keyed by its run id, so
        a resent turn_end lands once."""
        detail: dict[str, Any] = {"outcome": outcome}
        if spent is not None:
            detail |= {
                "run": spent.kind,
                "cost_usd": spent.cost_usd,
                "input_tokens": spent.input_tokens,
                "output_tokens": spent.output_tokens,
                "cache_read_tokens": spent.cache_read_tokens,
                "cache_creation_tokens": spent.cache_creation_tokens,
            }
        await self.record(
            "turn",
            agent,
            turn_title(agent, outcome, spent),
            detail=detail,
            key=f"turn:{agent}:{run_id}" if run_id is not None else None,
        )

    async def approval_cancelled(self, approval_id: int, by: str) -> None:
        row = await self.store.approvals.get(approval_id)
        if row is None:
            return
        await self.record(
            "approval",
            row.subject,
            f"approval #{approval_id} cancelled: {row.kind} for {row.subject} (by {by})",
            others=[row.requester],
            detail={"approval_id": approval_id, "state": "cancelled"},
            key=f"approval:{approval_id}:resolved",
        )

    async def question_asked(self, asker: str, question_id: int, question: str) -> None:
        await self.record(
            "question",
            asker,
            f"{asker} asked the operator (question #{question_id}): {quote(question)}",
            detail={"question_id": question_id, "state": "asked"},
            key=f"question:{question_id}:asked",
        )

    async def question_answered(
        self, asker: str, question_id: int, answer: str, message_id: int
    ) -> None:
        await self.record(
            "answer",
            asker,
            f"the operator answered {asker}'s question #{question_id}: {quote(answer)}",
            detail={"question_id": question_id, "state": "answered", "message_id": message_id},
            key=f"question:{question_id}:answered",
        )

    async def prune_once(self, keep_days: float, now: float | None = None) -> int:
        """Drop the events older than ``keep_days``; return how many went."""
        cutoff = (time.time() if now is None else now) - keep_days * 86400
        return await self.store.activity.prune(cutoff)

    async def prune_forever(self, keep_days: float) -> None:
        """Hourly, for the coordinator's life; a store that is away is tried next hour."""
        while True:
            try:
                dropped = await self.prune_once(keep_days)
            except HiveError as exc:
                log.warning("activity log: could not prune: %s", exc.message)
            else:
                if dropped:
                    log.info(
                        "activity log: %d events older than %g days dropped", dropped, keep_days
                    )
            await anyio.sleep(PRUNE_EVERY)
