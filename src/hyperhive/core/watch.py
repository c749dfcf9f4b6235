"""The operator's long-polls: the reply to a message, the inbox and the activity feed
as they grow (``hivectl send --wait``, ``inbox --follow``, ``activity -f``).

Each read answers at once when there is something new, else sleeps on the wake-up
the change will fire and reads again, up to its ``wait``. The wake-up is taken
before the read, so a change that lands between the two is never slept through.
Nothing is kept per follower: each answer says where the next one starts.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio

from hyperhive.core.broker import to_message
from hyperhive.core.dashboard.feed import KINDS, feed_page, feed_since, parse_cursor
from hyperhive.core.notify import ANY, EventBus, Notifier
from hyperhive.errors import InvalidRequest, NotFound
from hyperhive.names import OPERATOR
from hyperhive.protocol import ActivityFeed, Message, OpActivityReq
from hyperhive.store import Store

__all__ = ["INBOX_SCAN", "OperatorWatch"]

# How many of the operator's newest messages a follow step looks through for new ones.
INBOX_SCAN = 1000


class OperatorWatch:
    def __init__(self, store: Store, notifier: Notifier, bus: EventBus) -> None:
        self.store = store
        self.notifier = notifier
        self.bus = bus

    async def reply_to(self, message_id: int, wait: float) -> Message | None:
        """The first reply to the operator's ``message_id``, waiting up to ``wait`` s."""
        sent = await self.store.messages.get(message_id)
        if sent is None or sent.sender != OPERATOR:
            raise NotFound(f"no message #{message_id} from the operator")
        deadline = time.monotonic() + wait
        while True:
            event = self.notifier.event(OPERATOR)  # before the read: no lost wake-up
            for row in await self.store.messages.thread(message_id):
                if row.in_reply_to == message_id and row.recipient == OPERATOR:
                    return to_message(row)
            if not await self.notifier.wait(event, deadline - time.monotonic()):
                return None

    async def inbox_after(
        self, after: int, limit: int, unread_only: bool, wait: float
    ) -> list[Message]:
        """Messages to the operator with an id above ``after``, oldest first."""
        deadline = time.monotonic() + wait
        while True:
            event = self.notifier.event(OPERATOR)
            rows = await self.store.messages.inbox(OPERATOR, INBOX_SCAN, unread_only)
            new = [to_message(r) for r in rows if r.id > after]
            if new or not await self.notifier.wait(event, deadline - time.monotonic()):
                return new[:limit]

    async def activity(self, req: OpActivityReq) -> ActivityFeed:
        kind = req.kind or None
        if kind is not None and kind not in KINDS:
            raise InvalidRequest(f"unknown kind {kind!r}; one of: {', '.join(KINDS)} (or none)")
        agent = req.agent or None
        if req.after is None:
            before = parse_cursor(req.before) if req.before else None
            page = await feed_page(
                self.store, limit=req.limit, before=before, agent=agent, kind=kind
            )
            items = [i.entry() for i in page.items]
            return ActivityFeed(
                items=items,
                older=str(page.older) if page.older else None,
                newest=items[0].cursor if items else None,
            )
        after = parse_cursor(req.after)
        deadline = time.monotonic() + req.wait
        while True:
            async with self._feed_changes() as changed:
                found = await feed_since(self.store, after, limit=req.limit, agent=agent, kind=kind)
                if not found:
                    with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
                        await changed()
            if found or time.monotonic() >= deadline:
                items = [i.entry() for i in found]
                return ActivityFeed(
                    items=items, older=None, newest=items[0].cursor if items else str(after)
                )

    @asynccontextmanager
    async def _feed_changes(self) -> AsyncIterator[Callable[[], Awaitable[None]]]:
        """Until the feed may have grown: any stored change (a message between agents
        too) or an event of the activity log. Taken before the read it guards."""
        event = self.notifier.event(ANY)
        async with self.bus.subscribe(replay=False) as events:

            async def changed() -> None:
                async with anyio.create_task_group() as tg:

                    async def on_store() -> None:
                        await event.wait()
                        tg.cancel_scope.cancel()

                    tg.start_soon(on_store)
                    async for e in events:
                        if e["kind"] == "activity":
                            break
                    tg.cancel_scope.cancel()

            yield changed
