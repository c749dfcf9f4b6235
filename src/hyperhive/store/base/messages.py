"""The durable mailbox, and a long-poll parked in the store."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Protocol

from hyperhive.store.base.feed import FeedCursor
from hyperhive.store.rows import MessageCounts, MessageRow, Poll, Recv

__all__ = ["NOT_PARKED", "MessageRepo", "ParkedPoll"]


class ParkedPoll(Protocol):
    """A poll that found nothing, left in the store for its agent's next wake-up."""

    def withdraw(self) -> bool:
        """Stop it. True: no answer is coming. False: one is, from :meth:`answer`."""
        ...

    async def answer(self) -> Poll | None:
        """What the commit that held it found (``None``: nothing, poll again)."""
        ...


class _NotParked:
    """A parked poll nothing will answer."""

    def withdraw(self) -> bool:
        return True

    async def answer(self) -> Poll | None:
        return None


NOT_PARKED: ParkedPoll = _NotParked()


class MessageRepo(ABC):
    """The durable mailbox. Delivery is at-least-once.

    A row handed out by ``recv``/``poll`` is *delivered*; ``ack_until`` or
    ``ack_ids`` make it *acked*, and an acked row is never handed out again.
    ``attach`` (a new harness incarnation) makes every delivered, unacked
    row of that agent undelivered again. Marking rows delivered need not
    force its own fsync: losing that mark only means a redelivery.
    """

    @abstractmethod
    async def send(
        self, sender: str, recipient: str, body: str, in_reply_to: int | None = None
    ) -> int:
        """Store one message; wakes ``recipient``. ``NotFound`` for a bad ``in_reply_to``.

        ``in_reply_to`` of ``None`` or ≤ 0 means "not a reply".
        """

    @abstractmethod
    async def send_keyed(
        self, sender: str, recipient: str, body: str, key: str
    ) -> tuple[int, bool]:
        """Store one message unless ``sender`` already delivered ``key`` to ``recipient``.

        Returns the message's id and whether it is new; a repeat returns the
        first delivery's id and wakes nobody. The key and the message commit
        together, so a producer that crashed before noting a delivery can
        simply send again.
        """

    @abstractmethod
    async def get(self, message_id: int) -> MessageRow | None: ...

    @abstractmethod
    async def recv(self, agent: str, limit: int) -> Recv:
        """The oldest ≤ ``limit`` undelivered rows, marked delivered; or fenced."""

    @abstractmethod
    async def poll(self, agent: str, todo_version: int, limit: int) -> Poll | None:
        """What a waiting harness should wake for, or ``None`` if nothing yet.

        A stop (fenced) wins; otherwise undelivered mail (marked delivered),
        an open todo upserted after the caller's ``todo_version`` (a net change:
        a todo filed and cleared since then wakes no one), or a pending compact.
        """

    async def poll_or_park(self, agent: str, todo_version: int, limit: int) -> Poll | ParkedPoll:
        """:meth:`poll` for a long-poll: when nothing is there yet, a parked poll.

        A backend may answer the parked poll from the commit that next wakes
        ``agent`` (no second round trip); this one never does. Either way the
        waiter sleeps on the store's wake-up, then withdraws the parked poll.
        """
        got = await self.poll(agent, todo_version, limit)
        return NOT_PARKED if got is None else got

    @abstractmethod
    async def ack_until(self, agent: str, up_to: int) -> int:
        """Ack every row of ``agent``'s with id ≤ ``up_to``; return how many."""

    @abstractmethod
    async def ack_ids(self, agent: str, ids: Sequence[int]) -> int:
        """Ack exactly these rows of ``agent``'s; others' ids are ignored."""

    @abstractmethod
    async def attach(self, agent: str) -> int:
        """New incarnation: unfence, redeliver unacked rows; return its number. Wakes."""

    @abstractmethod
    async def fence(self, agent: str) -> None:
        """The next ``recv``/``poll`` of ``agent`` says stop. Wakes."""

    @abstractmethod
    async def inbox(
        self, recipient: str, limit: int = 50, unread_only: bool = False
    ) -> list[MessageRow]:
        """The newest ``limit`` rows to ``recipient``, oldest first."""

    @abstractmethod
    async def outbox(self, sender: str, limit: int = 50) -> list[MessageRow]:
        """The newest ``limit`` rows from ``sender``, oldest first."""

    @abstractmethod
    async def thread(self, message_id: int) -> list[MessageRow]:
        """The whole reply tree ``message_id`` belongs to, by id ([] if unknown)."""

    @abstractmethod
    async def unread_counts(self, recipient: str) -> dict[str, int]:
        """Unacked rows to ``recipient``, counted per sender."""

    @abstractmethod
    async def scan(self, after_id: int = 0, limit: int = 1000) -> list[MessageRow]:
        """Every row with id > ``after_id``, by id: the read API for audits and tests."""

    @abstractmethod
    async def page(
        self, before: FeedCursor | None = None, limit: int = 50, agent: str | None = None
    ) -> list[MessageRow]:
        """Newest first by ``(created_at, id)``: up to ``limit`` rows strictly before
        ``before`` (None: from the newest), only those ``agent`` sent or received when
        given (the activity feed). Walks an index and stops at ``limit``."""

    @abstractmethod
    async def counts(self) -> list[MessageCounts]:
        """Per sender or recipient name, by name: sent, delivered, still unacked (metrics)."""
