"""Due work: reminders and schedules read before firing, what to fire, what was fired."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hyperhive.store.rows.loose_ends import ReminderRow, ScheduleRow

__all__ = ["DueWork", "FireReminder", "FireSchedule", "Fired"]


@dataclass(frozen=True, slots=True)
class DueWork:
    """Reminders and schedules due at a moment, read before anything is fired.

    ``next_due`` is the earliest due time of any unfired reminder or live
    schedule (these included), ``None`` if there is none.
    """

    reminders: tuple[ReminderRow, ...] = ()
    schedules: tuple[ScheduleRow, ...] = ()
    next_due: float | None = None


@dataclass(frozen=True, slots=True)
class FireReminder:
    """Deliver reminder ``id`` as ``body`` (rendered by the caller)."""

    id: int
    body: str


@dataclass(frozen=True, slots=True)
class FireSchedule:
    """Deliver schedule ``id`` as ``body`` and move it to ``next_at``.

    ``was_next_at`` is the due time the caller read: a schedule fired or
    moved since then is left alone, so two firers never deliver it twice.
    """

    id: int
    body: str
    was_next_at: float
    next_at: float


@dataclass(frozen=True, slots=True)
class Fired:
    """What ``fire`` delivered (message ids per recipient) and the next due time."""

    delivered: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    next_due: float | None = None
