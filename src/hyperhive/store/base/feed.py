"""A position in the dashboard's feed, which pages messages and activity rows alike."""

from __future__ import annotations

__all__ = ["FeedCursor"]

#: A feed position: an item's ``(at, id)``. A page holds the rows strictly before it.
FeedCursor = tuple[float, int]
