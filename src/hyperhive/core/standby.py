"""A coordinator on PostgreSQL: stand by until it holds the lease, then serve, fenced.

Several coordinators may share one database (a second ``hivectl serve`` on
the same home, or one on another machine's home). Each goes through two
gates before it serves:

1. the home's ``run/coordinator.lock`` (:mod:`hyperhive.homelock`), waited
   for, not refused: one active coordinator per home, because the home's
   sockets are bound by whoever holds it;
2. the database's lease (:mod:`hyperhive.store.postgres.lease`): one active
   coordinator per hive. Its epoch fences every write from then on.

Only then are the services built (what the previous active one left on the
home's disk is read now, not when this process started). A first start takes
both gates before it loads the coordinator's modules (FastAPI's import alone
costs seconds on a busy machine); a standby loads them as soon as it learns it
must wait, so a takeover serves at once. Losing the lease —
a renewal refused or unanswered, or any write refused as fenced — cancels
the coordinator at once and raises :class:`LeaseLost`: ``hivectl serve``
exits non-zero, and its supervisor (or the operator) starts it again, as a
standby.
"""

from __future__ import annotations

import importlib
import logging
import os
import socket

import anyio
from anyio.abc import TaskStatus

from hyperhive.config import HiveConfig, HivePaths
from hyperhive.homelock import HomeLock
from hyperhive.store.postgres import PostgresStore
from hyperhive.store.postgres.lease import DEFAULT_TTL_S, Lease, LeaseHolder, LeaseLost

__all__ = ["LeaseLost", "holder_name", "serve_with_lease"]

log = logging.getLogger(__name__)


def preload(dashboard: bool) -> None:
    """Import what serving needs (idempotent): a standby does it before it waits."""
    importlib.import_module("hyperhive.core.coordinator")
    if dashboard:
        importlib.import_module("hyperhive.core.api.dashboard.server")


def holder_name(paths: HivePaths) -> str:
    """How this coordinator is named in the lease row (and in a standby's log)."""
    return f"{socket.gethostname()} pid {os.getpid()} ({paths.home})"


async def serve_with_lease(
    paths: HivePaths,
    config: HiveConfig,
    store: PostgresStore,
    *,
    dashboard: bool = True,
    ttl: float = DEFAULT_TTL_S,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Stand by, then serve while the lease holds; closes ``store`` whatever happens."""
    task_status.started()  # standing by is running: a signal stops it like a serve
    served = False
    lock = HomeLock(paths, "coordinator")
    lease = Lease(store.db.url, holder_name(paths), ttl=ttl)
    try:

        def home_held(pid: int | None) -> None:
            # Loaded before it stands by, not at takeover: a standby has 10 s from the
            # active one's death to serving. (Blocking the loop here delays nothing.)
            preload(dashboard)
            log.info(
                "standing by: this home's coordinator runs as %s; taking over when it exits",
                f"pid {pid}" if pid else "another process",
            )

        await lock.wait_acquire(home_held)

        def standing_by(now: LeaseHolder) -> None:
            preload(dashboard)
            log.info(
                "standing by: %s is the active coordinator (lease epoch %d, %.1fs left); "
                "taking over if it stops renewing",
                now.holder,
                now.epoch,
                max(0.0, now.expires_in),
            )

        async def active(epoch: int) -> None:
            nonlocal served
            store.db.fence_with(epoch)
            log.info("active: %s holds the coordinator lease, epoch %d", lease.holder, epoch)
            from hyperhive.core.coordinator import Coordinator  # a first start loads it now

            coordinator = Coordinator(paths, config, store)
            served = True  # the coordinator's lifespan closes the store from here on
            await coordinator.run(dashboard=dashboard)

        store.db.on_fenced = lease.lost
        try:
            await lease.hold(active, standing_by)
        except LeaseLost as exc:
            log.error("%s", exc.message)
            raise
    finally:
        lock.release()
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await lease.close()
            if not served:
                await store.close()
