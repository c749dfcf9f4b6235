"""One hive's durable state: a repository per aggregate and the change feed."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from hyperhive.store.base.activity import ActivityRepo
from hyperhive.store.base.agents import AgentRepo
from hyperhive.store.base.approvals import ApprovalRepo
from hyperhive.store.base.changes import ChangeCallback, ChangeFeed
from hyperhive.store.base.hosts import HostRepo
from hyperhive.store.base.loose_ends import LooseEndRepo
from hyperhive.store.base.messages import MessageRepo
from hyperhive.store.base.metalog import MetaLogRepo, TopologyRepo
from hyperhive.store.base.placements import PlacementRepo
from hyperhive.store.base.schedules import ScheduleRepo
from hyperhive.store.base.settings import SettingsRepo
from hyperhive.store.base.snapshots import SnapshotRepo
from hyperhive.store.base.spend import SpendRepo
from hyperhive.store.base.trash import TrashRepo

__all__ = ["Store"]


class Store(ABC):
    """One hive's durable state. Open with ``hyperhive.store.open_store``."""

    messages: MessageRepo
    agents: AgentRepo
    loose_ends: LooseEndRepo
    approvals: ApprovalRepo
    schedules: ScheduleRepo
    topology: TopologyRepo
    meta: MetaLogRepo
    hosts: HostRepo
    placements: PlacementRepo
    trash: TrashRepo
    snapshots: SnapshotRepo

    spend: SpendRepo
    activity: ActivityRepo
    settings: SettingsRepo

    #: The schema version the store is at after opening (both backends number alike).
    schema_version: int

    def __init__(self) -> None:
        self._feed = ChangeFeed()

    def on_change(self, callback: ChangeCallback) -> Callable[[], None]:
        """Call ``callback(agent)`` after each commit that adds something for ``agent``.

        Runs on the event loop that made the change (SQLite) or that listens
        (PostgreSQL). Returns an unsubscribe function.
        """
        return self._feed.subscribe(callback)

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the data lives, safe to log (a path, or a URL without its password)."""

    @abstractmethod
    async def close(self) -> None:
        """Finish work in flight, then release the database."""
