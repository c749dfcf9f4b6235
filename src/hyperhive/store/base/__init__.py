"""The store interface: one ``Store``, a repository per aggregate, two backends.

One module per aggregate, named like its backends' (``store/sqlite/<aggregate>.py``,
``store/postgres/<aggregate>.py``); this package re-exports them all, so callers
import from ``hyperhive.store.base``.

Every method is one transaction: when its await returns, the change has
been committed durably (an ``ok`` the coordinator answers has survived
fsync), or it raised and nothing changed. Operations that span tables
(asking the operator = message + question; firing due work = messages +
updates) are single methods for that reason.

Wake-ups belong to the store. After a commit that adds something an agent's
``wait`` must see (mail, a todo change, a compact flag, a fence, a new
incarnation), the store reports the agent's name to every ``on_change``
callback, on the event loop, after the commit. SQLite does it in-process;
PostgreSQL with ``NOTIFY`` in the same transaction and ``LISTEN`` (plus a
sweep after reconnecting, because NOTIFY is not stored).

Backends raise ``hyperhive.errors`` only: ``NotFound``, ``Conflict``,
``InvalidRequest``, ``LimitExceeded`` for the domain rules each repository's
docstrings state, and ``StorageError`` when the database itself refuses.
"""

from __future__ import annotations

from hyperhive.store.base.activity import ActivityRepo
from hyperhive.store.base.agents import AgentRepo
from hyperhive.store.base.approvals import ApprovalRepo
from hyperhive.store.base.changes import ChangeCallback, ChangeFeed
from hyperhive.store.base.feed import FeedCursor
from hyperhive.store.base.hosts import HostRepo, host_missing, host_taken
from hyperhive.store.base.loose_ends import LooseEndRepo
from hyperhive.store.base.messages import NOT_PARKED, MessageRepo, ParkedPoll
from hyperhive.store.base.metalog import MetaLogRepo, TopologyRepo
from hyperhive.store.base.placements import PlacementRepo, move_missing
from hyperhive.store.base.schedules import ScheduleRepo
from hyperhive.store.base.settings import SettingsRepo
from hyperhive.store.base.snapshots import SnapshotRepo
from hyperhive.store.base.spend import SpendRepo
from hyperhive.store.base.store import Store
from hyperhive.store.base.trash import TrashRepo

__all__ = [
    "ActivityRepo",
    "AgentRepo",
    "ApprovalRepo",
    "ChangeCallback",
    "ChangeFeed",
    "FeedCursor",
    "HostRepo",
    "LooseEndRepo",
    "MessageRepo",
    "MetaLogRepo",
    "NOT_PARKED",
    "ParkedPoll",
    "PlacementRepo",
    "ScheduleRepo",
    "SettingsRepo",
    "SpendRepo",
    "Store",
    "TopologyRepo",
    "SnapshotRepo",
    "TrashRepo",
    "host_missing",
    "host_taken",
    "move_missing",
]
