"""What both backends' activity repositories share: the columns a feed page
selects, the cursor above every event, and a selected row as an ``ActivityRow``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hyperhive.store.base import FeedCursor
from hyperhive.store.rows import ActivityRow

__all__ = ["COLS", "TOP", "activity_row"]

COLS = "a.id, a.at, a.kind, a.agent, a.others, a.title, a.detail"
TOP: FeedCursor = (float("inf"), 2**63 - 1)


def activity_row(r: Sequence[Any]) -> ActivityRow:
    """A row of :data:`COLS` (``others`` and ``detail`` stored as JSON text)."""
    return ActivityRow(
        int(r[0]), float(r[1]), r[2], r[3], tuple(json.loads(r[4])), r[5], json.loads(r[6])
    )
