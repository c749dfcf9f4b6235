"""The durable mailbox: send, recv, ack, and the harness's long-poll ``wait``.

Delivery is at-least-once. A row handed to an agent (``recv`` or ``wait``)
is *delivered*; it is *acked* by ``ack_until`` or by the harness once the
turn it woke ended cleanly. A new harness incarnation (``attach``) makes
every delivered-but-unacked row of the agent undelivered again. Acked rows
never come back. Every query is scoped to the calling agent's own rows.
The rows live in the store (``hyperhive.store``); the store reports every
agent a commit added something for, and the coordinator feeds that to the
``Notifier`` that ``wait`` sleeps on.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence

from hyperhive.core.infra.notify import Notifier
from hyperhive.errors import LimitExceeded
from hyperhive.names import GRACEFUL_STOP
from hyperhive.protocol import Message, WaitResult
from hyperhive.store import Store
from hyperhive.store.base import NOT_PARKED, ParkedPoll
from hyperhive.store.rows import MessageRow, Poll

__all__ = ["RECV_CAP", "WAKE_BATCH", "Broker", "graceful_stop_message", "to_message"]

RECV_CAP = 5
WAKE_BATCH = 20


def graceful_stop_message(agent: str) -> Message:
    return Message.model_validate(
        {
            "id": 0,
            "from": GRACEFUL_STOP,
            "to": agent,
            "created_at": time.time(),
            "body": (
                "The hive is stopping you gracefully. Flush anything durable to your "
                "state notes now and end this turn; new mail waits for your next start."
            ),
        }
    )


def to_message(row: MessageRow) -> Message:
    return Message.model_validate(
        {
            "id": row.id,
            "from": row.sender,
            "to": row.recipient,
            "body": row.body,
            "in_reply_to": row.in_reply_to,
            "created_at": row.created_at,
            "acked": row.acked,
        }
    )


class Broker:
    """Message operations on the store; ``wait`` sleeps on the store's wake-ups."""

    def __init__(self, store: Store, notifier: Notifier, max_body: int) -> None:
        self.store = store
        self.notifier = notifier
        self.max_body = max_body
        self._waiting: Counter[str] = Counter()

    def waiting(self, agent: str) -> int:
        """How many of ``agent``'s waits are asleep right now (parked, or held by a budget)."""
        return self._waiting[agent]

    def check_body(self, body: str) -> None:
        size = len(body.encode("utf-8"))
        if size > self.max_body:
            raise LimitExceeded(
                f"message body is {size} bytes; the limit is {self.max_body} bytes. "
                "Put large content in a file and send its path"
            )

    def send(
        self, sender: str, recipient: str, body: str, in_reply_to: int | None = None
    ) -> Awaitable[int]:
        """Store a message (routing already decided by the caller); await its id.

        The store's coroutine, returned (a send's path has no coroutine of the broker's).
        """
        self.check_body(body)
        return self.store.messages.send(sender, recipient, body, in_reply_to)

    async def send_keyed(self, sender: str, recipient: str, body: str, key: str) -> int:
        """Store a message once per ``(sender, recipient, key)``; a repeat returns the first id."""
        self.check_body(body)
        msg_id, _ = await self.store.messages.send_keyed(sender, recipient, body, key)
        return msg_id

    async def recv(self, agent: str, max_rows: int = 1) -> list[Message]:
        """Never blocks: the oldest undelivered rows, at most ``RECV_CAP``."""
        got = await self.store.messages.recv(agent, max(1, min(max_rows, RECV_CAP)))
        if got.fenced:
            return [graceful_stop_message(agent)]
        return [to_message(m) for m in got.messages]

    async def ack_until(self, agent: str, up_to: int) -> int:
        """Ack every row of ``agent``'s with id ≤ ``up_to``."""
        return await self.store.messages.ack_until(agent, up_to)

    async def ack_ids(self, agent: str, ids: Sequence[int]) -> int:
        """Ack exactly these rows of ``agent``'s (the messages a clean turn handled)."""
        return await self.store.messages.ack_ids(agent, ids)

    async def attach(self, agent: str) -> int:
        """Start a new incarnation: unfence, redeliver unacked rows; return its number."""
        return await self.store.messages.attach(agent)

    async def fence(self, agent: str) -> None:
        await self.store.messages.fence(agent)

    @staticmethod
    def _result(got: Poll) -> WaitResult:
        if got.stop:
            return WaitResult(stop=True, todo_version=got.todo_version)
        return WaitResult(
            messages=[to_message(m) for m in got.messages],
            todo_version=got.todo_version,
            todos_changed=got.todos_changed,
            compact=got.compact,
        )

    async def wait(
        self,
        agent: str,
        seconds: float,
        todo_version: int,
        hold: Callable[[], Awaitable[object]] | None = None,
    ) -> WaitResult:
        """Return as soon as there is mail, a todo change, a compact or a stop.

        While ``hold()`` is truthy (an agent over budget) only a stop is
        answered: nothing is handed out, so its mail stays undelivered.
        """
        deadline = time.monotonic() + seconds
        while True:
            event = self.notifier.event(agent)  # taken before the poll: no lost wake-up
            parked: ParkedPoll = NOT_PARKED
            if hold is not None and await hold():
                if (await self.store.agents.get(agent)).fenced:
                    return WaitResult(stop=True, held=True, todo_version=todo_version)
            else:
                got = await self.store.messages.poll_or_park(agent, todo_version, WAKE_BATCH)
                if isinstance(got, Poll):
                    return self._result(got)
                parked = got
            remaining = deadline - time.monotonic()
            self._waiting[agent] += 1
            try:
                fired = remaining > 0 and await self.notifier.wait(event, remaining)
            finally:
                self._waiting[agent] -= 1
                if not self._waiting[agent]:
                    del self._waiting[agent]  # no entry left behind per agent ever seen
                # Woken, timed out or cancelled: the commit that woke us may hold an answer.
                coming = not parked.withdraw()
            if coming and (answer := await parked.answer()) is not None:
                return self._result(answer)
            if not fired:
                return WaitResult(todo_version=todo_version)

    async def inbox(
        self, recipient: str, limit: int = 50, unread_only: bool = False
    ) -> list[Message]:
        """The newest ``limit`` rows addressed to ``recipient`` (oldest first)."""
        rows = await self.store.messages.inbox(recipient, limit, unread_only)
        return [to_message(r) for r in rows]

    async def outbox(self, sender: str, limit: int = 50) -> list[Message]:
        return [to_message(r) for r in await self.store.messages.outbox(sender, limit)]
