"""The activity feed: what the hive did, newest first, one page at a time. Pure.

A page is anchored on messages (the bulk of a hive's history, paged in the
store by id); approvals asked and resolved are merged in by time within the
page's span. Each item says what it is (``kind``), who it concerns, and,
for a message, its thread (the root of its ``in_reply_to`` chain, when the
page can see it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from hyperhive.store.rows import ApprovalRow, MessageRow

__all__ = ["KINDS", "FeedItem", "FeedKind", "build_feed"]

FeedKind = Literal["message", "approval"]
KINDS: tuple[FeedKind, ...] = ("message", "approval")


@dataclass(frozen=True, slots=True)
class FeedItem:
    at: float
    kind: FeedKind
    agents: tuple[str, ...]  # who it concerns (filtering; the first is the actor)
    title: str
    body: str = ""
    message_id: int | None = None
    in_reply_to: int | None = None
    state: str | None = None


def _message(m: MessageRow) -> FeedItem:
    return FeedItem(
        at=m.created_at,
        kind="message",
        agents=(m.sender, m.recipient),
        title=f"{m.sender} → {m.recipient}",
        body=m.body,
        message_id=m.id,
        in_reply_to=m.in_reply_to,
        state="acked" if m.acked else ("delivered" if m.delivered_at else "queued"),
    )


def _approval_items(a: ApprovalRow) -> list[FeedItem]:
    asked = FeedItem(
        at=a.created_at,
        kind="approval",
        agents=(a.requester, a.subject),
        title=f"approval #{a.id} asked: {a.kind} for {a.subject} (by {a.requester})",
        state="pending" if a.state == "pending" else "asked",
    )
    if a.resolved_at is None:
        return [asked]
    resolved = FeedItem(
        at=a.resolved_at,
        kind="approval",
        agents=(a.subject, a.requester),
        title=f"approval #{a.id} {a.state}: {a.kind} for {a.subject}",
        body=a.resolution or "",
        state=a.state,
    )
    return [asked, resolved]


def build_feed(
    messages: Sequence[MessageRow],
    approvals: Sequence[ApprovalRow],
    *,
    more: bool,
    kind: FeedKind | None = None,
    agent: str | None = None,
) -> list[FeedItem]:
    """One page, newest first.

    ``messages`` is the page from the store (newest first); ``more`` says
    older messages exist, so approvals older than the page's oldest message
    belong to a later page. With no messages at all, every approval shows.
    """
    floor = messages[-1].created_at if (messages and more) else float("-inf")
    items: list[FeedItem] = []
    if kind in (None, "message"):
        items.extend(_message(m) for m in messages)
    if kind in (None, "approval"):
        for a in approvals:
            items.extend(i for i in _approval_items(a) if i.at >= floor)
    if agent is not None:
        items = [i for i in items if agent in i.agents]
    items.sort(key=lambda i: (i.at, i.message_id or 0), reverse=True)
    return items
