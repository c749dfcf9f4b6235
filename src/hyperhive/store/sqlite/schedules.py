"""Schedules on SQLite, and firing due reminders and schedules into inboxes."""

from __future__ import annotations

import time
from collections.abc import Sequence

from hyperhive.store.base import ScheduleRepo
from hyperhive.store.rows import DueWork, Fired, FireReminder, FireSchedule, ScheduleRow
from hyperhive.store.sqlite import rowmap
from hyperhive.store.sqlite.common import insert_message, placeholders
from hyperhive.store.sqlite.engine import Engine, Tx

__all__ = ["SqliteSchedules"]


def _next_due(tx: Tx) -> float | None:
    row = tx.one(
        "SELECT MIN(t) FROM (SELECT MIN(due_at) AS t FROM reminders WHERE fired_at IS NULL "
        "UNION ALL SELECT MIN(next_at) FROM schedules WHERE cancelled_at IS NULL)"
    )
    return None if row is None or row[0] is None else float(row[0])


class SqliteSchedules(ScheduleRepo):
    def __init__(self, engine: Engine) -> None:
        self._db = engine

    async def add(
        self,
        owner: str,
        target: str,
        prompt: str,
        every_seconds: float | None,
        cron: str | None,
        next_at: float,
    ) -> int:
        return await self._db.run(
            lambda tx: tx.insert(
                "INSERT INTO schedules(owner, target, prompt, every_seconds, cron, next_at, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (owner, target, prompt, every_seconds, cron, next_at, time.time()),
            )
        )

    async def for_agents(self, agents: Sequence[str]) -> list[ScheduleRow]:
        if not agents:
            return []
        marks = placeholders(len(agents))
        rows = await self._db.run(
            lambda tx: tx.all(
                f"SELECT * FROM schedules WHERE cancelled_at IS NULL AND "
                f"(owner IN ({marks}) OR target IN ({marks})) ORDER BY id",
                (*agents, *agents),
            ),
            durable=False,
        )
        return [rowmap.schedule(r) for r in rows]

    async def all(self) -> list[ScheduleRow]:
        rows = await self._db.run(
            lambda tx: tx.all("SELECT * FROM schedules ORDER BY id"), durable=False
        )
        return [rowmap.schedule(r) for r in rows]

    async def due(self, now: float) -> DueWork:
        def op(tx: Tx) -> DueWork:
            reminders = tx.all(
                "SELECT * FROM reminders WHERE fired_at IS NULL AND due_at <= ? "
                "ORDER BY due_at, id",
                (now,),
            )
            schedules = tx.all(
                "SELECT * FROM schedules WHERE cancelled_at IS NULL AND next_at <= ? ORDER BY id",
                (now,),
            )
            return DueWork(
                reminders=tuple(rowmap.reminder(r) for r in reminders),
                schedules=tuple(rowmap.schedule(r) for r in schedules),
                next_due=_next_due(tx),
            )

        return await self._db.run(op, durable=False)

    async def fire(
        self,
        now: float,
        sender: str,
        reminders: Sequence[FireReminder],
        schedules: Sequence[FireSchedule],
    ) -> Fired:
        def op(tx: Tx) -> Fired:
            delivered: dict[str, list[int]] = {}
            for r in reminders:
                row = tx.one(
                    "UPDATE reminders SET fired_at = ? WHERE id = ? AND fired_at IS NULL "
                    "RETURNING agent",
                    (now, r.id),
                )
                if row is not None:
                    agent = str(row[0])
                    delivered.setdefault(agent, []).append(
                        insert_message(tx, sender, agent, r.body, None)
                    )
            for s in schedules:
                row = tx.one(
                    "UPDATE schedules SET next_at = ? WHERE id = ? AND cancelled_at IS NULL "
                    "AND next_at = ? RETURNING target",
                    (s.next_at, s.id, s.was_next_at),
                )
                if row is not None:
                    target = str(row[0])
                    delivered.setdefault(target, []).append(
                        insert_message(tx, sender, target, s.body, None)
                    )
            return Fired(
                delivered={a: tuple(ids) for a, ids in delivered.items()},
                next_due=_next_due(tx),
            )

        return await self._db.run(op)
