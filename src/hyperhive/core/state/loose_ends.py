"""Loose ends: reminders, todos, approvals, operator questions, schedules.

Domain wording over the store's rows; who may see or cancel what is decided
by the caller (``agent_api``) from the topology. A todo change bumps the
agent's ``todo_version`` and the store wakes its ``wait``.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from croniter import croniter

from hyperhive.errors import InvalidRequest
from hyperhive.names import OPERATOR
from hyperhive.protocol import LooseEnd
from hyperhive.store import Store
from hyperhive.store.rows import LooseEndKind, LooseEndRow, ScheduleRow

__all__ = ["OWNER_COLUMN", "LooseEnds", "next_cron", "owner_of"]


def next_cron(expr: str, after: float) -> float:
    """The next firing of a cron expression strictly after ``after`` (UTC)."""
    if not croniter.is_valid(expr):
        raise InvalidRequest(f"cron {expr!r} is not a valid 5-field cron expression")
    base = datetime.fromtimestamp(after, UTC)
    return float(croniter(expr, base).get_next(float))


class LooseEnds:
    """Reminders, todos, questions, approvals and schedules, kept in the store.

    The store wakes an agent's ``wait`` after a todo change or a message;
    nothing here notifies by hand.
    """

    def __init__(self, store: Store, max_pending_reminders: int) -> None:
        self.store = store
        self.max_pending_reminders = max_pending_reminders

    async def remind(self, agent: str, message: str, due_at: float) -> int:
        return await self.store.loose_ends.remind(
            agent, message, due_at, self.max_pending_reminders
        )

    async def todo_upsert(
        self, agent: str, subsystem: str, key: str, body: str, *, wake: bool = True
    ) -> int:
        return await self.store.loose_ends.todo_upsert(agent, subsystem, key, body, wake=wake)

    async def todo_clear(self, agent: str, subsystem: str, key: str) -> bool:
        return await self.store.loose_ends.todo_clear(agent, subsystem, key)

    async def ask_operator(self, asker: str, question: str) -> tuple[int, int]:
        """A question row plus its message in the operator's inbox: (question, message) ids."""
        return await self.store.loose_ends.ask(asker, question, OPERATOR, f"[question] {question}")

    async def answer_question(self, question_id: int, answer: str) -> tuple[str, int]:
        """Close a question; the answer goes to the asker in reply to it."""
        row, msg_id = await self.store.loose_ends.answer(question_id, answer, OPERATOR)
        return row.asker, msg_id

    async def questions(self, open_only: bool = True) -> list[dict[str, object]]:
        return [asdict(q) for q in await self.store.loose_ends.questions(open_only)]

    async def create_approval(
        self, kind: str, requester: str, subject: str, payload: dict[str, object]
    ) -> int:
        return await self.store.approvals.create(kind, requester, subject, payload)

    async def schedule(
        self, owner: str, target: str, prompt: str, every: float | None, cron: str | None
    ) -> int:
        now = time.time()
        next_at = now + every if every is not None else next_cron(cron or "", now)
        return await self.store.schedules.add(owner, target, prompt, every, cron, next_at)

    async def schedules_for(self, agents: list[str]) -> list[dict[str, object]]:
        return [asdict(s) for s in await self.store.schedules.for_agents(agents)]

    async def row(self, kind: LooseEndKind, row_id: int) -> LooseEndRow | None:
        return await self.store.loose_ends.get(kind, row_id)

    async def schedule_row(self, schedule_id: int) -> ScheduleRow | None:
        row = await self.store.loose_ends.get("schedule", schedule_id)
        return row if isinstance(row, ScheduleRow) else None

    async def cancel(self, kind: LooseEndKind, row_id: int) -> bool:
        """Cancel one row (ownership already checked by the caller)."""
        return await self.store.loose_ends.cancel(kind, row_id)

    async def list_for(self, agents: list[str] | None) -> list[LooseEnd]:
        """Every open loose end of ``agents`` (None = the whole hive)."""
        found = await self.store.loose_ends.open(agents)
        return [
            *(
                _end("reminder", r.id, r.agent, r.message, r.created_at, due_at=r.due_at)
                for r in found.reminders
            ),
            *(
                _end("todo", t.id, t.agent, t.body, t.created_at, subsystem=t.subsystem, key=t.key)
                for t in found.todos
            ),
            *(
                _end(
                    "approval",
                    a.id,
                    a.requester,
                    f"{a.kind}: {a.subject}",
                    a.created_at,
                    state=a.state,
                )
                for a in found.approvals
            ),
            *(
                _end("question", q.id, q.asker, q.question, q.created_at, state=q.state)
                for q in found.questions
            ),
            *(
                _end("schedule", s.id, s.target, s.prompt, s.created_at, due_at=s.next_at)
                for s in found.schedules
            ),
        ]


def _end(
    kind: LooseEndKind, row_id: int, agent: str, text: str, created_at: float, **extra: Any
) -> LooseEnd:
    return LooseEnd(kind=kind, id=row_id, agent=agent, body=text, created_at=created_at, **extra)


def owner_of(kind: LooseEndKind, row: LooseEndRow) -> str:
    """Who may cancel ``row``: the agent (or an ancestor) named by ``OWNER_COLUMN``."""
    owner: str = getattr(row, OWNER_COLUMN[kind])
    return owner


OWNER_COLUMN: dict[LooseEndKind, str] = {
    "reminder": "agent",
    "todo": "agent",
    "approval": "requester",
    "question": "asker",
    "schedule": "owner",
}
