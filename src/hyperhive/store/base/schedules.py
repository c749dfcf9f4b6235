"""Recurring prompts, and firing whatever is due."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from hyperhive.store.rows import DueWork, Fired, FireReminder, FireSchedule, ScheduleRow

__all__ = ["ScheduleRepo"]


class ScheduleRepo(ABC):
    """Recurring prompts, and firing everything due (reminders included)."""

    @abstractmethod
    async def add(
        self,
        owner: str,
        target: str,
        prompt: str,
        every_seconds: float | None,
        cron: str | None,
        next_at: float,
    ) -> int: ...

    @abstractmethod
    async def for_agents(self, agents: Sequence[str]) -> list[ScheduleRow]:
        """Uncancelled schedules owned by or targeting any of ``agents``."""

    @abstractmethod
    async def all(self) -> list[ScheduleRow]:
        """Every schedule, cancelled ones included, by id."""

    @abstractmethod
    async def due(self, now: float) -> DueWork:
        """Unfired reminders and uncancelled schedules due at ``now``, and the next due time.

        Read only: the caller renders bodies, then calls :meth:`fire`.
        """

    @abstractmethod
    async def fire(
        self,
        now: float,
        sender: str,
        reminders: Sequence[FireReminder],
        schedules: Sequence[FireSchedule],
    ) -> Fired:
        """Deliver them as messages from ``sender`` and mark them fired, in one transaction.

        A reminder already fired or cancelled, or a schedule cancelled or
        moved off ``was_next_at``, is skipped. Wakes every recipient.
        """
