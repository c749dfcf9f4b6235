"""The activity feed: what the hive did, newest first, one page at a time.

Two sources: the messages table and the activity log (turns with their cost,
approvals, spawns, crashes, bash tasks, subagents, budget notices…). A page
is the N newest items strictly older than a cursor across both: each source
is asked for at most N+1 rows before the cursor (an index walk in the store),
and the answers are merged by ``(at, source, id)``, newest first. That key is
a total order, so the next page (cursor = the last item's key) neither
repeats nor skips an item, whichever source it came from, even at equal times.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hyperhive.core.activity import KINDS as LOG_KINDS
from hyperhive.errors import InvalidRequest
from hyperhive.protocol import FeedEntry
from hyperhive.store import Store
from hyperhive.store.base import FeedCursor
from hyperhive.store.rows import ActivityRow, MessageRow

__all__ = [
    "KINDS",
    "WALK_MAX",
    "Cursor",
    "FeedItem",
    "FeedPage",
    "feed_page",
    "feed_since",
    "merge",
    "parse_cursor",
]

KINDS: tuple[str, ...] = ("message", *LOG_KINDS)
# A source's rank breaks ties of time between sources (part of the cursor).
_LOG, _MESSAGES = 0, 1
_TOP_ID = 2**63 - 1


@dataclass(frozen=True, slots=True, order=True)
class Cursor:
    """An item's place in the feed: ``(at, source, id)``; older pages sort before it."""

    at: float
    source: int
    id: int

    def __str__(self) -> str:
        return f"{self.at!r}_{self.source}_{self.id}"

    def before_in(self, source: int) -> FeedCursor:
        """The store cursor of ``source``'s rows strictly older than this item."""
        if source < self.source:
            return (self.at, _TOP_ID)  # the same time still counts as older
        if source > self.source:
            return (self.at, 0)  # only strictly earlier times
        return (self.at, self.id)


def parse_cursor(text: str) -> Cursor:
    try:
        at, source, row = text.split("_")
        cursor = Cursor(float(at), int(source), int(row))
    except ValueError:
        raise InvalidRequest(
            f"bad feed cursor {text!r}; use the 'older' link's value (or none for the newest)"
        ) from None
    if cursor.source not in (_LOG, _MESSAGES) or cursor.id < 0 or cursor.at != cursor.at:
        raise InvalidRequest(f"bad feed cursor {text!r}; use the 'older' link's value")
    return cursor


@dataclass(frozen=True, slots=True)
class FeedItem:
    at: float
    kind: str
    agents: tuple[str, ...]  # who it concerns (the first is the actor)
    title: str
    cursor: Cursor
    body: str = ""
    message_id: int | None = None
    in_reply_to: int | None = None
    state: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    def entry(self) -> FeedEntry:
        """As the JSON API and ``hivectl activity --json`` give it."""
        return FeedEntry(
            at=self.at,
            kind=self.kind,
            agents=list(self.agents),
            title=self.title,
            body=self.body,
            message_id=self.message_id,
            in_reply_to=self.in_reply_to,
            state=self.state,
            detail=dict(self.detail),
            cursor=str(self.cursor),
        )


@dataclass(frozen=True, slots=True)
class FeedPage:
    items: list[FeedItem]
    older: Cursor | None  # where the next (older) page starts, if there is one


def _message(m: MessageRow) -> FeedItem:
    return FeedItem(
        at=m.created_at,
        kind="message",
        agents=(m.sender, m.recipient),
        title=f"{m.sender} → {m.recipient}",
        cursor=Cursor(m.created_at, _MESSAGES, m.id),
        body=m.body,
        message_id=m.id,
        in_reply_to=m.in_reply_to,
        state="acked" if m.acked else ("delivered" if m.delivered_at else "queued"),
    )


def _logged(r: ActivityRow) -> FeedItem:
    state = r.detail.get("state") or r.detail.get("phase") or r.detail.get("outcome")
    return FeedItem(
        at=r.at,
        kind=r.kind,
        agents=(r.agent, *r.others),
        title=r.title,
        cursor=Cursor(r.at, _LOG, r.id),
        state=str(state) if state is not None else None,
        detail=r.detail,
    )


def merge(sources: Sequence[Sequence[FeedItem]], limit: int) -> FeedPage:
    """The ``limit`` newest of the sources' items (each newest first), and the next cursor.

    Each source must hold up to ``limit + 1`` items, so "more exists" is known.
    """
    merged = list(heapq.merge(*sources, key=lambda i: i.cursor, reverse=True))
    page = merged[:limit]
    return FeedPage(page, page[-1].cursor if len(merged) > limit and page else None)


async def feed_page(
    store: Store,
    *,
    limit: int,
    before: Cursor | None = None,
    agent: str | None = None,
    kind: str | None = None,
) -> FeedPage:
    """One page, newest first; ``kind`` one of :data:`KINDS` (``None``: all)."""
    sources: list[list[FeedItem]] = []
    if kind in (None, "message"):
        rows = await store.messages.page(
            before.before_in(_MESSAGES) if before else None, limit + 1, agent
        )
        sources.append([_message(m) for m in rows])
    if kind != "message":
        logged = await store.activity.page(
            before.before_in(_LOG) if before else None, limit + 1, agent=agent, kind=kind
        )
        sources.append([_logged(r) for r in logged])
    return merge(sources, limit)


# How far back a follower's step walks for what is new: a follower further behind than
# this many items gets the oldest of them it reached, and goes on from there.
WALK_MAX = 2000


async def feed_since(
    store: Store,
    after: Cursor,
    *,
    limit: int,
    agent: str | None = None,
    kind: str | None = None,
) -> list[FeedItem]:
    """The oldest ``limit`` items newer than ``after``, newest first (a follower's step).

    Pages back from the newest until it reaches ``after``: a follower that keeps up
    reads one page with nothing new on it.
    """
    newer: list[FeedItem] = []
    before: Cursor | None = None
    while True:
        page = await feed_page(store, limit=limit, before=before, agent=agent, kind=kind)
        fresh = [i for i in page.items if i.cursor > after]
        newer.extend(fresh)
        if len(fresh) < len(page.items) or page.older is None or len(newer) >= WALK_MAX:
            return newer[-limit:]
        before = page.older
