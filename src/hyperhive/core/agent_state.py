"""An agent's durable state row: status line, turn outcome, compact flag, desired running.

A thin service over the store's agent repository: the rows live in the store,
the news they make (status events, login lost or regained) is told from here.
"""

from __future__ import annotations

import time

from hyperhive.core.activity import ActivityLog
from hyperhive.core.notices import Notices
from hyperhive.core.notify import EventBus
from hyperhive.errors import Conflict
from hyperhive.names import OPERATOR
from hyperhive.protocol import (
    CompactQueued,
    LoggedIn,
    ModelSpend,
    NeedsLogin,
    TurnEnded,
    TurnEndReq,
)
from hyperhive.store import Store
from hyperhive.store.rows import AgentState as AgentStateRow
from hyperhive.store.rows import SpendEntry

__all__ = ["AgentState"]


class AgentState:
    def __init__(self, store: Store, bus: EventBus, notices: Notices) -> None:
        self.store = store
        self.bus = bus
        self.notices = notices
        # The feed's writer, shared by the services built on this one (lifecycle).
        self.activity = ActivityLog(store, bus)

    async def row(self, agent: str) -> AgentStateRow:
        """The agent's row, created with defaults on first use."""
        return await self.store.agents.get(agent)

    async def ensure(self, agents: list[str]) -> None:
        await self.store.agents.ensure(agents)

    async def set_status(self, agent: str, text: str) -> None:
        await self.store.agents.set_status(agent, text, time.time() if text else None)
        self.bus.emit("status", agent=agent, status_text=text)

    async def turn_end(
        self, agent: str, req: TurnEndReq, spent: SpendEntry | None = None
    ) -> TurnEnded:
        """Ack what the turn handled and record its outcome, in one transaction.

        ``spent`` is what the turn's run was counted at (budgets recorded it
        first). A login lost or regained is news for the submitter.
        """
        turn = await self.store.agents.record_turn(
            agent, req.outcome, req.context_usage, req.session_id, ack=req.handled
        )
        cost = spent.cost_usd if spent is not None else None
        self.bus.emit("turn_end", agent=agent, outcome=req.outcome, cost_usd=cost)
        run_id = req.spend.run_id if req.spend is not None else None
        await self.activity.turn(agent, req.outcome, run_id, spent)
        if req.outcome == "needs_login" and not turn.was_needs_login:
            await self.activity.record(
                "needs_login", agent, f"{agent} needs a login (`hivectl login {agent}`)"
            )
            await self.notices.notify_submitter(agent, NeedsLogin(agent=agent))
        elif req.outcome == "ok" and turn.was_needs_login:
            await self.notices.notify_submitter(agent, LoggedIn(agent=agent))
        return TurnEnded(
            compact_pending=turn.compact_pending,
            spend=ModelSpend.of(spent.figures()) if spent is not None else None,
        )

    async def request_compact(self, agent: str, threshold: float | None) -> CompactQueued:
        """Queue a compaction; ``threshold`` gates the agent's own ask, ``None`` (the
        operator's) queues it whatever the last turn used."""
        asked = await self.store.agents.request_compact(agent, threshold)  # wakes if queued
        if not asked.queued:
            usage = asked.usage
            shown = "unknown (no turn recorded yet)" if usage is None else f"{usage:.0%}"
            raise Conflict(
                f"compact refused: the last turn used {shown} of the context window; "
                f"compaction is allowed above {threshold or 0:.0%}. Nothing was changed"
            )
        return CompactQueued(
            queued=True,
            context_usage=asked.usage,
            note="compaction runs when the current turn ends",
        )

    async def desired_running(self, agent: str) -> bool:
        return (await self.row(agent)).desired_running

    async def set_desired_running(self, agent: str, running: bool) -> None:
        await self.store.agents.set_desired(agent, running)

    async def all_desired_running(self) -> set[str]:
        return set(await self.store.agents.desired_running())

    async def forget(self, agent: str) -> None:
        await self.store.agents.delete(agent)

    async def all_rows(self) -> dict[str, AgentStateRow]:
        return {a.name: a for a in await self.store.agents.all()}

    async def unread_by_operator(self) -> dict[str, int]:
        """Per sender, its messages to the operator not yet acked."""
        return await self.store.messages.unread_counts(OPERATOR)
