"""Fires due reminders and scheduled prompts into inboxes.

Sleeps until the next due time (or until poked by a new row), so an idle
hive costs nothing. Reminders that fell due while the coordinator was down
fire at start; a schedule that missed several periods fires once, then
resumes from now.
"""

from __future__ import annotations

import logging
import math
import sqlite3
import time

import anyio

from hyperhive.config import HivePaths
from hyperhive.core.broker import insert_message
from hyperhive.core.db import Database
from hyperhive.core.loose_ends import next_cron
from hyperhive.core.notify import Notifier
from hyperhive.errors import StorageError
from hyperhive.names import REMINDER
from hyperhive.safefs import atomic_write_beneath

__all__ = ["Scheduler"]

log = logging.getLogger(__name__)

IDLE_RECHECK = 300.0


class Scheduler:
    def __init__(
        self, db: Database, notifier: Notifier, paths: HivePaths, spill_bytes: int
    ) -> None:
        self.db = db
        self.notifier = notifier
        self.paths = paths
        self.spill_bytes = spill_bytes
        self._poke = anyio.Event()

    def poke(self) -> None:
        """A reminder or schedule was added or cancelled: re-plan the sleep."""
        self._poke.set()

    async def run(self) -> None:
        while True:
            self._poke = anyio.Event()
            next_due = await self.fire_due(time.time())
            delay = IDLE_RECHECK if next_due is None else max(0.0, next_due - time.time())
            with anyio.move_on_after(min(delay, IDLE_RECHECK)):
                await self._poke.wait()

    def _reminder_body(self, row: sqlite3.Row) -> str:
        message: str = row["message"]
        if len(message.encode("utf-8")) <= self.spill_bytes:
            return f"[reminder #{row['id']}] {message}"
        path = self.paths.agent_state(row["agent"]) / "reminders" / f"{row['id']}.md"
        state = self.paths.agent_state(row["agent"])
        try:
            state.mkdir(parents=True, exist_ok=True, mode=0o700)
            # The state dir is the agent's: never follow a link it planted there.
            atomic_write_beneath(state, path, message.encode())
        except StorageError as exc:
            # Deliver it anyway, cut short: a reminder is never lost to a bad spill.
            log.warning("reminder #%s of %s not spilled: %s", row["id"], row["agent"], exc)
            head = message[: self.spill_bytes]
            return (
                f"[reminder #{row['id']}] (could not be written to {path}: {exc.message}; "
                f"first {len(head)} of {len(message)} characters follow) {head}"
            )
        return (
            f"[reminder #{row['id']}] ({len(message)} characters, too long to inline) Read({path})"
        )

    async def fire_due(self, now: float) -> float | None:
        """Deliver everything due at ``now``; return the next due time, if any."""

        def op(conn: sqlite3.Connection) -> tuple[set[str], float | None]:
            woken: set[str] = set()
            for row in conn.execute(
                "SELECT * FROM reminders WHERE fired_at IS NULL AND due_at <= ? ORDER BY due_at",
                (now,),
            ).fetchall():
                insert_message(conn, REMINDER, row["agent"], self._reminder_body(row), None)
                conn.execute("UPDATE reminders SET fired_at = ? WHERE id = ?", (now, row["id"]))
                woken.add(row["agent"])
            for row in conn.execute(
                "SELECT * FROM schedules WHERE cancelled_at IS NULL AND next_at <= ?", (now,)
            ).fetchall():
                body = f"[scheduled prompt #{row['id']} from {row['owner']}] {row['prompt']}"
                insert_message(conn, REMINDER, row["target"], body, None)
                if row["every_seconds"]:
                    period = float(row["every_seconds"])
                    missed = math.floor((now - row["next_at"]) / period) + 1
                    next_at = row["next_at"] + missed * period
                else:
                    next_at = next_cron(row["cron"], now)
                conn.execute("UPDATE schedules SET next_at = ? WHERE id = ?", (next_at, row["id"]))
                woken.add(row["target"])
            (r_next,) = conn.execute(
                "SELECT MIN(due_at) FROM reminders WHERE fired_at IS NULL"
            ).fetchone()
            (s_next,) = conn.execute(
                "SELECT MIN(next_at) FROM schedules WHERE cancelled_at IS NULL"
            ).fetchone()
            candidates = [t for t in (r_next, s_next) if t is not None]
            return woken, (min(candidates) if candidates else None)

        woken, next_due = await self.db.run(op)
        for agent in woken:
            self.notifier.notify(agent)
        if woken:
            log.info("delivered due reminders/schedules to %s", ", ".join(sorted(woken)))
        return next_due
