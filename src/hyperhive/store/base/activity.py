"""The hive's activity feed."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from hyperhive.store.base.feed import FeedCursor
from hyperhive.store.rows import ActivityRow

__all__ = ["ActivityRepo"]


class ActivityRepo(ABC):
    """What the hive did, one row per event, for the dashboard's feed.

    Written by the coordinator where each event happens; messages stay in
    their own table (the feed merges both). Bounded by :meth:`prune`.
    """

    @abstractmethod
    async def record(
        self,
        kind: str,
        agent: str,
        title: str,
        *,
        others: Sequence[str] = (),
        detail: Mapping[str, Any] | None = None,
        key: str | None = None,
        at: float | None = None,
    ) -> ActivityRow | None:
        """Store one event (``at`` defaults to now); ``None`` if ``key`` is already known.

        ``key`` makes a resent report (a turn_end after a restart) land once.
        """

    @abstractmethod
    async def page(
        self,
        before: FeedCursor | None = None,
        limit: int = 50,
        *,
        agent: str | None = None,
        kind: str | None = None,
        since: float | None = None,
    ) -> list[ActivityRow]:
        """Newest first by ``(at, id)``: up to ``limit`` rows strictly before ``before``,
        of ``kind``, concerning ``agent`` (actor or other) and at or after ``since`` when
        given. Index walks, stopping at ``since`` (a window reads only its own rows)."""

    @abstractmethod
    async def prune(self, older_than: float) -> int:
        """Delete the rows with ``at < older_than``; return how many."""
