"""Reminders, todos and operator questions."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from hyperhive.store.rows import (
    LooseEndKind,
    LooseEndRow,
    OpenLooseEnds,
    QuestionRow,
    ReminderRow,
    TodoRow,
)

__all__ = ["LooseEndRepo"]


class LooseEndRepo(ABC):
    """Reminders, todos and operator questions, plus the cross-kind view and cancel.

    Who may see or cancel what is the caller's rule (from the topology);
    the store only stores. A todo change bumps the agent's ``todo_version``.
    """

    @abstractmethod
    async def remind(self, agent: str, message: str, due_at: float, max_pending: int) -> int:
        """Add a reminder; ``LimitExceeded`` if ``agent`` already has ``max_pending``."""

    @abstractmethod
    async def todo_upsert(
        self, agent: str, subsystem: str, key: str, body: str, *, wake: bool = True
    ) -> int:
        """Insert or replace the todo at (agent, subsystem, key); bumps and wakes.

        ``wake=False`` stores it at version 0: listed, but no waiter wakes for it.
        """

    @abstractmethod
    async def todo_clear(self, agent: str, subsystem: str, key: str) -> bool: ...

    @abstractmethod
    async def ask(self, asker: str, question: str, recipient: str, body: str) -> tuple[int, int]:
        """A question row plus its message ``body`` to ``recipient``: (question, message)."""

    @abstractmethod
    async def answer(self, question_id: int, answer: str, sender: str) -> tuple[QuestionRow, int]:
        """Close an open question; the answer goes to the asker in reply to its message.

        Returns the answered row and the reply's message id. ``NotFound`` for
        an unknown id, ``InvalidRequest`` if it is no longer open.
        """

    @abstractmethod
    async def questions(self, open_only: bool = True) -> list[QuestionRow]: ...

    @abstractmethod
    async def reminders(self, include_fired: bool = False) -> list[ReminderRow]:
        """Every reminder (unfired only, unless ``include_fired``), by id."""

    @abstractmethod
    async def todos(self, agent: str | None = None) -> list[TodoRow]:
        """Every todo (of ``agent`` if given), by id."""

    @abstractmethod
    async def get(self, kind: LooseEndKind, row_id: int) -> LooseEndRow | None: ...

    @abstractmethod
    async def cancel(self, kind: LooseEndKind, row_id: int) -> bool:
        """Cancel an open row; ``False`` if absent or already closed.

        Reminders (unfired) and todos are deleted; approvals, questions and
        schedules are marked cancelled and stay readable.
        """

    @abstractmethod
    async def open(self, agents: Sequence[str] | None = None) -> OpenLooseEnds:
        """Every open row whose agent is in ``agents`` (``None``: the whole hive).

        The agent of a row is its reminder/todo agent, approval requester,
        question asker, or schedule target.
        """
