"""What wakes an agent, and what its wake says. Pure module: no I/O.

The watcher (:mod:`.watcher`) turns each ``/sync`` answer into
:class:`Incoming` messages and asks these rules which of them wake the agent
and how the wake reads; the invite rule decides which invitations it takes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "WAKE_MAX_MESSAGES",
    "WAKE_TEXT_CHARS",
    "Incoming",
    "Reason",
    "accept_invite",
    "render_wake",
    "wake_reason",
]

# A wake is a prompt: long messages are cut here, and the wake says how to read the rest.
WAKE_TEXT_CHARS = 1000
WAKE_MAX_MESSAGES = 20
Reason = Literal["dm", "mention", "room"]


@dataclass(frozen=True, slots=True)
class Incoming:
    """One text message in a room the agent has joined, as the watcher saw it."""

    room_id: str
    room_name: str
    sender: str
    body: str
    is_direct: bool  # two members (the agent and one other), or invited as a DM
    mentions: tuple[str, ...] = ()  # m.mentions.user_ids
    formatted: str = ""
    since: str | None = None  # a /messages token before this message (its room's prev_batch)
    event_id: str = ""


def wake_reason(msg: Incoming, me: str, wake_rooms: Iterable[str]) -> Reason | None:
    """Why ``msg`` wakes the agent ``me`` (None: it does not). Its own messages never do."""
    if msg.sender == me:
        return None
    if msg.is_direct:
        return "dm"
    if me in msg.mentions or me in msg.body or me in msg.formatted:
        return "mention"
    if msg.room_id in set(wake_rooms):
        return "room"
    return None


def accept_invite(inviter: str, operator: str | None, allowed: Iterable[str]) -> bool:
    """An invitation is taken only from the operator or a sender the agent's config names."""
    return inviter == operator or inviter in set(allowed)


_LABEL = {"dm": "direct message", "mention": "mention", "room": "message"}


def render_wake(items: Sequence[tuple[Reason, Incoming]], limit: int = WAKE_TEXT_CHARS) -> str:
    """The wake body: for each message its room, sender and text, long ones cut with a marker
    and the read call that shows the rest."""
    lines = [f"matrix: {len(items)} new message(s)"]
    for reason, msg in items[:WAKE_MAX_MESSAGES]:
        lines.append(f"- {_LABEL[reason]} from {msg.sender} in {msg.room_name!r} ({msg.room_id}):")
        text = msg.body
        if len(text) > limit:
            read = f'mcp__matrix__read(room="{msg.room_id}"'
            read += f', since="{msg.since}")' if msg.since else ")"
            cut = f"[… cut at {limit} of {len(msg.body)} characters; the rest: {read}]"
            text = f"{text[:limit]}\n{cut}"
        lines.extend(f"  {line}" for line in text.splitlines() or [""])
    if len(items) > WAKE_MAX_MESSAGES:
        lines.append(
            f"- and {len(items) - WAKE_MAX_MESSAGES} more: mcp__matrix__rooms() shows where, "
            "mcp__matrix__read(room=...) reads them"
        )
    lines.append('Answer with mcp__matrix__send(to="<room ID or user ID>", text=...).')
    return "\n".join(lines)
