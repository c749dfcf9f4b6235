"""The hive's id, kept in the store so every coordinator of the hive agrees on it.

The id names the agents' system users (``hh-<hive id>-<agent>``). It used to
live only in ``<home>/hive-id``; two coordinators of one hive (failover on
PostgreSQL, possibly on different machines, each with its own home) would
each have made their own. Now the store holds it: the first coordinator
keeps its home's id if the home has one (an existing hive's users keep their
names), else a new one; every later start reads the store's. The home's file
is then made to agree, so what on this machine reads it (a local agent host
naming users) uses the same id.
"""

from __future__ import annotations

import logging
import string

import anyio

from hyperhive.atomic import atomic_write_text
from hyperhive.config import HivePaths
from hyperhive.errors import StorageError
from hyperhive.names import HIVE_ID_LENGTH
from hyperhive.store.base import SettingsRepo
from hyperhive.sysusers import hive_id as home_hive_id

__all__ = ["HIVE_ID_KEY", "hive_identity"]

log = logging.getLogger(__name__)

HIVE_ID_KEY = "hive_id"
_ALPHABET = frozenset(string.ascii_lowercase + string.digits)


async def hive_identity(paths: HivePaths, settings: SettingsRepo) -> str:
    """The hive's id: the store's, else this home's (made if missing) kept in the store."""
    kept = await settings.get(HIVE_ID_KEY)
    if kept is None:
        # The home's own id (an existing hive's), or a new one written there.
        candidate = await anyio.to_thread.run_sync(home_hive_id, paths)
        # Another coordinator may have kept one meanwhile: the first kept wins.
        kept = await settings.keep(HIVE_ID_KEY, candidate)
    if len(kept) != HIVE_ID_LENGTH or not set(kept) <= _ALPHABET:
        raise StorageError(
            f"the hive store holds {kept!r} as the hive id, not {HIVE_ID_LENGTH} of [a-z0-9]; "
            "restore it from a backup (the agents' system users are named after it: "
            "`getent passwd | grep hyperhive`)"
        )
    await anyio.to_thread.run_sync(_agree_at_home, paths, kept)
    return kept


def _agree_at_home(paths: HivePaths, kept: str) -> None:
    """Make ``<home>/hive-id`` say ``kept`` (what reads it on this machine must agree)."""
    path = paths.home / "hive-id"
    try:
        current: str | None = path.read_text().strip()
    except FileNotFoundError:
        current = None
    if current == kept:
        return
    if current is not None:
        log.warning(
            "%s held hive id %r; the hive's store keeps %r: taking the store's (system "
            "users named after %r are no longer this hive's)",
            path,
            current,
            kept,
            current,
        )
    atomic_write_text(path, kept + "\n")
