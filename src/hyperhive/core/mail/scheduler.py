"""Fires due reminders and scheduled prompts into inboxes.

Sleeps until the next due time (or until poked by a new row), so an idle
hive costs nothing. Reminders that fell due while the coordinator was down
fire at start; a schedule that missed several periods fires once, then
resumes from now.
"""

from __future__ import annotations

import logging
import math
import random
import time

import anyio

from hyperhive.core.state.loose_ends import next_cron
from hyperhive.errors import StorageError, Unavailable
from hyperhive.names import REMINDER
from hyperhive.store import Store
from hyperhive.store.rows import FireReminder, FireSchedule, ReminderRow, ScheduleRow

__all__ = ["Scheduler"]

log = logging.getLogger(__name__)

IDLE_RECHECK = 300.0
# After a failed firing (the store unavailable), try again after this long (jittered).
RETRY_S = 1.0


class Scheduler:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._poke = anyio.Event()

    def poke(self) -> None:
        """A reminder or schedule was added or cancelled: re-plan the sleep."""
        self._poke.set()

    async def run(self) -> None:
        while True:
            self._poke = anyio.Event()
            try:
                next_due = await self.fire_due(time.time())
            except (Unavailable, StorageError) as exc:
                # The database is away (a restart, a failover): nothing was fired, so
                # try again shortly rather than take the coordinator down with it.
                log.warning("scheduler: %s", exc.message)
                next_due = time.time() + RETRY_S * random.uniform(1.0, 1.5)
            delay = IDLE_RECHECK if next_due is None else max(0.0, next_due - time.time())
            with anyio.move_on_after(min(delay, IDLE_RECHECK)):
                await self._poke.wait()

    @staticmethod
    def _reminder_body(row: ReminderRow) -> str:
        """The reminder's message, whole: a reminder is at most 64 KiB (``remind``
        refuses more), so it fits a message and no file in the agent's directory is
        needed (its host may be another machine)."""
        return f"[reminder #{row.id}] {row.message}"

    @staticmethod
    def _next_at(row: ScheduleRow, now: float) -> float:
        if row.every_seconds:
            # A schedule that missed several periods fires once, then keeps its phase.
            missed = math.floor((now - row.next_at) / row.every_seconds) + 1
            return row.next_at + missed * row.every_seconds
        return next_cron(row.cron or "", now)

    async def fire_due(self, now: float) -> float | None:
        """Deliver everything due at ``now``; return the next due time, if any."""
        due = await self.store.schedules.due(now)
        if not due.reminders and not due.schedules:
            return due.next_due
        reminders = [FireReminder(r.id, self._reminder_body(r)) for r in due.reminders]
        schedules = [
            FireSchedule(
                s.id,
                f"[scheduled prompt #{s.id} from {s.owner}] {s.prompt}",
                was_next_at=s.next_at,
                next_at=self._next_at(s, now),
            )
            for s in due.schedules
        ]
        fired = await self.store.schedules.fire(now, REMINDER, reminders, schedules)
        if fired.delivered:
            log.info("delivered due reminders/schedules to %s", ", ".join(sorted(fired.delivered)))
        return fired.next_due
