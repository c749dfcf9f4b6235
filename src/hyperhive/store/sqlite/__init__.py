"""The embedded SQLite store: ``hive.db`` in the hive home, one writer thread."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hyperhive.store.base import Store
from hyperhive.store.sqlite.activity import SqliteActivity
from hyperhive.store.sqlite.agents import SqliteAgents
from hyperhive.store.sqlite.approvals import SqliteApprovals
from hyperhive.store.sqlite.engine import Engine
from hyperhive.store.sqlite.hosts import SqliteHosts
from hyperhive.store.sqlite.loose_ends import SqliteLooseEnds
from hyperhive.store.sqlite.messages import SqliteMessages
from hyperhive.store.sqlite.meta import SqliteMetaLog, SqliteTopology
from hyperhive.store.sqlite.placements import SqlitePlacements
from hyperhive.store.sqlite.schedules import SqliteSchedules
from hyperhive.store.sqlite.settings import SqliteSettings
from hyperhive.store.sqlite.snapshots import SqliteSnapshots
from hyperhive.store.sqlite.spend import SqliteSpend
from hyperhive.store.sqlite.trash import SqliteTrash

__all__ = ["SqliteStore"]


class SqliteStore(Store):
    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        super().__init__()
        self.path = path
        self.engine = Engine(path, self._feed.publish, readonly=readonly)
        self.schema_version = self.engine.version
        self.messages = SqliteMessages(self.engine)
        self.agents = SqliteAgents(self.engine)
        self.loose_ends = SqliteLooseEnds(self.engine)
        self.approvals = SqliteApprovals(self.engine)
        self.schedules = SqliteSchedules(self.engine)
        self.topology = SqliteTopology(self.engine)
        self.meta = SqliteMetaLog(self.engine)
        self.hosts = SqliteHosts(self.engine)
        self.placements = SqlitePlacements(self.engine)
        self.spend = SqliteSpend(self.engine)
        self.trash = SqliteTrash(self.engine)
        self.snapshots = SqliteSnapshots(self.engine)
        self.activity = SqliteActivity(self.engine)
        self.settings = SqliteSettings(self.engine)

    @classmethod
    async def open(cls, path: Path, *, readonly: bool = False) -> SqliteStore:
        """Open and migrate.

        ``readonly`` reads beside a running coordinator and never writes or
        migrates; only pure reads work (``scan``, ``inbox``, ``all``, ``list``…),
        and anything that writes, ``agents.get`` of a new agent included, raises
        ``StorageError``.
        """
        # Migrating can wait on a lock or write a lot: keep it off the event loop.
        return await asyncio.to_thread(lambda: cls(path, readonly=readonly))

    async def integrity_check(self) -> str:
        """``"ok"``, or what SQLite found wrong with the file."""
        return await asyncio.to_thread(self.engine.integrity_check)

    @property
    def location(self) -> str:
        return str(self.path)

    async def close(self) -> None:
        await asyncio.to_thread(self.engine.close)
