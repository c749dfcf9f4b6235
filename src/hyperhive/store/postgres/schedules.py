"""Schedules, and firing whatever is due, on PostgreSQL (semantics: ``base.ScheduleRepo``).

Firing is guarded row by row (a reminder still unfired, a schedule still at
the due time the caller read), so two coordinators firing at once — the
standby that just took over, and the old active one still finishing — never
deliver one reminder twice.
"""

from __future__ import annotations

from collections.abc import Sequence

from hyperhive.store.base import ScheduleRepo
from hyperhive.store.postgres._repo import Conn, PgRepo, now
from hyperhive.store.postgres.loose_ends import REMINDER_COLS, SCHEDULE_COLS, schedule_row
from hyperhive.store.postgres.messages import insert_message
from hyperhive.store.rows import (
    DueWork,
    Fired,
    FireReminder,
    FireSchedule,
    ReminderRow,
    ScheduleRow,
)

__all__ = ["PgSchedules"]


class PgSchedules(PgRepo, ScheduleRepo):
    async def add(
        self,
        owner: str,
        target: str,
        prompt: str,
        every_seconds: float | None,
        cron: str | None,
        next_at: float,
    ) -> int:
        async def op(conn: Conn) -> int:
            cur = await conn.execute(
                "INSERT INTO schedules(owner, target, prompt, every_seconds, cron, next_at, "
                "created_at) VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (owner, target, prompt, every_seconds, cron, next_at, now()),
            )
            row = await cur.fetchone()
            assert row is not None
            return int(row[0])

        return await self._db.one(op)

    async def for_agents(self, agents: Sequence[str]) -> list[ScheduleRow]:
        names = list(agents)
        rows = await self._read(
            f"SELECT {SCHEDULE_COLS} FROM schedules WHERE cancelled_at IS NULL "
            "AND (owner = ANY(%s) OR target = ANY(%s)) ORDER BY id",
            (names, names),
        )
        return [schedule_row(r) for r in rows]

    async def all(self) -> list[ScheduleRow]:
        rows = await self._read(f"SELECT {SCHEDULE_COLS} FROM schedules ORDER BY id")
        return [schedule_row(r) for r in rows]

    async def due(self, now: float) -> DueWork:
        async def op(conn: Conn) -> DueWork:
            cur = await conn.execute(
                f"SELECT {REMINDER_COLS} FROM reminders WHERE fired_at IS NULL AND due_at <= %s "
                "ORDER BY due_at, id",
                (now,),
            )
            reminders = tuple(ReminderRow(*r) for r in await cur.fetchall())
            cur = await conn.execute(
                f"SELECT {SCHEDULE_COLS} FROM schedules WHERE cancelled_at IS NULL "
                "AND next_at <= %s ORDER BY next_at, id",
                (now,),
            )
            schedules = tuple(schedule_row(r) for r in await cur.fetchall())
            return DueWork(reminders=reminders, schedules=schedules, next_due=await _next_due(conn))

        return await self._db.snapshot(op)  # one snapshot for both kinds

    async def fire(
        self,
        now: float,
        sender: str,
        reminders: Sequence[FireReminder],
        schedules: Sequence[FireSchedule],
    ) -> Fired:
        async def op(conn: Conn, woken: set[str]) -> Fired:
            delivered: dict[str, list[int]] = {}
            for rem in reminders:
                cur = await conn.execute(
                    "UPDATE reminders SET fired_at = %s WHERE id = %s AND fired_at IS NULL "
                    "RETURNING agent",
                    (now, rem.id),
                )
                row = await cur.fetchone()
                if row is None:
                    continue
                msg = await insert_message(conn, sender, row[0], rem.body, None)
                delivered.setdefault(row[0], []).append(msg)
            for sch in schedules:
                cur = await conn.execute(
                    "UPDATE schedules SET next_at = %s WHERE id = %s AND cancelled_at IS NULL "
                    "AND next_at = %s RETURNING target",
                    (sch.next_at, sch.id, sch.was_next_at),
                )
                row = await cur.fetchone()
                if row is None:
                    continue
                msg = await insert_message(conn, sender, row[0], sch.body, None)
                delivered.setdefault(row[0], []).append(msg)
            woken.update(delivered)
            return Fired(
                delivered={k: tuple(v) for k, v in delivered.items()},
                next_due=await _next_due(conn),
            )

        return await self._tx_waking(op)


async def _next_due(conn: Conn) -> float | None:
    """The earliest due time of any unfired reminder or live schedule."""
    cur = await conn.execute(
        "SELECT least((SELECT min(due_at) FROM reminders WHERE fired_at IS NULL), "
        "(SELECT min(next_at) FROM schedules WHERE cancelled_at IS NULL))"
    )
    row = await cur.fetchone()
    return None if row is None or row[0] is None else float(row[0])
