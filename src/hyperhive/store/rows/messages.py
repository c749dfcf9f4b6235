"""Messages: a row, one name's traffic, and what ``recv`` and a poll hand back."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MessageCounts", "MessageRow", "Poll", "Recv"]


@dataclass(frozen=True, slots=True)
class MessageRow:
    id: int
    sender: str
    recipient: str
    body: str
    in_reply_to: int | None
    created_at: float
    delivered_at: float | None = None
    acked_at: float | None = None

    @property
    def acked(self) -> bool:
        return self.acked_at is not None


@dataclass(frozen=True, slots=True)
class MessageCounts:
    """One name's traffic: rows it sent, rows handed to it, rows it has yet to ack."""

    agent: str
    sent: int
    delivered: int
    queued: int


@dataclass(frozen=True, slots=True)
class Recv:
    """What ``recv`` hands an agent: its oldest undelivered mail, or "you are fenced"."""

    fenced: bool
    messages: tuple[MessageRow, ...] = ()


@dataclass(frozen=True, slots=True)
class Poll:
    """One non-blocking look for a waiting harness (``None`` from the store = nothing)."""

    stop: bool
    todo_version: int
    messages: tuple[MessageRow, ...] = ()
    todos_changed: bool = False
    compact: bool = False

    @staticmethod
    def found(
        version: int, messages: tuple[MessageRow, ...], todos_changed: bool, compact: bool
    ) -> Poll | None:
        """What an unfenced poll found; ``None`` when there is nothing to wake for."""
        if not messages and not todos_changed and not compact:
            return None
        return Poll(False, version, messages, todos_changed, compact)
