"""The operator's long-polls: a reply to a message, the activity feed as it grows.

Each answers at once when there is something, else waits up to ``wait``
seconds (kept under ``hivectl``'s answer bound) and says where to go on from,
so a follower asks again with nothing buffered for it and nothing skipped.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from hyperhive.protocol.base import Message, Req, RowId, _Out

__all__ = [
    "FOLLOW_WAIT_MAX",
    "ActivityFeed",
    "FeedEntry",
    "OpActivityReq",
    "OpAwaitReplyReq",
    "ReplyWait",
]

# A long-poll answers within this: well under the 30 s a hivectl call waits for an answer.
FOLLOW_WAIT_MAX = 25.0
_CURSOR = Field(default=None, max_length=64)


class ReplyWait(_Out):
    """The first reply to the operator's message (``None``: none within the wait)."""

    reply: Message | None


class OpAwaitReplyReq(Req[ReplyWait]):
    """The first message to the operator whose ``in_reply_to`` is ``message_id`` (one the
    operator sent), waiting up to ``wait`` seconds for it to arrive."""

    cmd: Literal["await_reply"]
    message_id: RowId
    wait: float = Field(default=0.0, ge=0.0, le=FOLLOW_WAIT_MAX)


class FeedEntry(_Out):
    """One item of the front page's feed (a message, a turn with its cost, a spawn…)."""

    at: float
    kind: str
    agents: list[str]
    title: str
    body: str
    message_id: int | None
    in_reply_to: int | None
    state: str | None
    detail: dict[str, JsonValue]
    cursor: str


class ActivityFeed(_Out):
    """A page of the feed, newest first.

    ``older``: the cursor of the next, older page (None: the end, or a follow step).
    ``newest``: where a follower goes on from (the newest item's cursor, else the
    ``after`` it gave; None: the feed is empty).
    """

    items: list[FeedEntry]
    older: str | None
    newest: str | None


class OpActivityReq(Req[ActivityFeed]):
    """The front page's feed: the ``limit`` newest items (older than ``before``), or, with
    ``after``, the oldest ``limit`` items newer than it, waiting up to ``wait`` seconds
    for one. ``agent`` and ``kind`` narrow it as the front page's filters do."""

    cmd: Literal["activity"]
    agent: str | None = Field(default=None, max_length=64)
    kind: str = Field(default="", max_length=16)
    limit: int = Field(default=20, ge=1, le=500)
    before: str | None = _CURSOR
    after: str | None = _CURSOR
    wait: float = Field(default=0.0, ge=0.0, le=FOLLOW_WAIT_MAX)
