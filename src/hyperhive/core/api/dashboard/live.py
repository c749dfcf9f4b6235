"""Server-sent events: the hive's changes and an agent's turn stream, pushed.

Nothing here polls. The hive stream forwards the coordinator's event bus
and wakes on the operator's mailbox notifier; the agent stream relays the
turn events its host streams over the host link and, while the agent is
down, waits on the bus for it to come back.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from hyperhive.core.api.dashboard.hostproxy import HostProxy
from hyperhive.core.fleet.hostlink import HostLink
from hyperhive.core.infra.hostcalls import StreamEnded
from hyperhive.core.infra.notify import ANY, EventBus, Notifier
from hyperhive.errors import Unavailable
from hyperhive.names import OPERATOR

__all__ = ["Emit", "EventStream", "agent_events", "hive_events"]

Emit = Callable[[str, Any], Awaitable[None]]
KEEPALIVE = 15.0
# At most one feed repaint per this many seconds, however busy the hive.
ACTIVITY_EVERY = 0.5


class EventStream(Response):
    """``text/event-stream`` fed by ``produce(emit)`` until the client goes away."""

    media_type = "text/event-stream"

    def __init__(
        self, produce: Callable[[Emit], Awaitable[None]], until: anyio.Event | None = None
    ) -> None:
        # No super().__init__: that would declare a Content-Length of 0.
        self.status_code = 200
        self.background = None
        self.raw_headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-store"),
            (b"x-accel-buffering", b"no"),
        ]
        self._produce = produce
        self._until = until

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        lock = anyio.Lock()

        async def chunk(data: bytes) -> None:
            async with lock:
                await send({"type": "http.response.body", "body": data, "more_body": True})

        async def emit(event: str, data: Any) -> None:
            await chunk(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())

        async with anyio.create_task_group() as tg:

            async def until_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                tg.cancel_scope.cancel()

            async def keepalive() -> None:
                while True:  # a comment line every so often finds dead connections
                    await anyio.sleep(KEEPALIVE)
                    await chunk(b": keepalive\n\n")

            async def until_closing() -> None:
                if self._until is not None:
                    await self._until.wait()
                    tg.cancel_scope.cancel()

            tg.start_soon(until_disconnect)
            tg.start_soon(until_closing)
            tg.start_soon(keepalive)
            await chunk(b"retry: 2000\n\n")
            try:
                await self._produce(emit)
            except OSError:
                pass
            tg.cancel_scope.cancel()
        with anyio.CancelScope(shield=True), anyio.move_on_after(1):
            try:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            except OSError:
                pass


async def hive_events(hive_bus: EventBus, notifier: Notifier, emit: Emit) -> None:
    """Every bus event (topology, agent, turn, status, approval, host) plus ``inbox``."""
    async with hive_bus.subscribe() as bus, anyio.create_task_group() as tg:

        async def mailbox() -> None:
            event = notifier.event(OPERATOR)
            while True:
                await event.wait()
                event = notifier.event(OPERATOR)
                await emit("inbox", {"kind": "inbox"})

        async def activity() -> None:
            # Any stored change (a message between agents too): the activity feed.
            event = notifier.event(ANY)
            while True:
                await event.wait()
                event = notifier.event(ANY)
                await emit("activity", {"kind": "activity"})
                await anyio.sleep(ACTIVITY_EVERY)  # a busy hive repaints the feed, not floods it

        tg.start_soon(mailbox)
        tg.start_soon(activity)
        await emit("hello", {"kind": "hello"})
        async for event in bus:
            await emit(str(event["kind"]), event)
        tg.cancel_scope.cancel()


async def agent_events(
    hive_bus: EventBus, hostlink: HostLink, proxy: HostProxy, agent: str, emit: Emit
) -> None:
    """``agent``'s turn events from its host; ``offline`` while it is not running."""
    retries = 0
    while True:
        async with hive_bus.subscribe() as bus:
            try:
                async for event in proxy.events(agent):
                    retries = 0
                    await emit(str(event.get("kind", "event")), event)
                why = "the agent host closed the stream"
            except (Unavailable, StreamEnded) as exc:
                why = exc.message
            if retries == 0:
                await emit("offline", {"kind": "offline", "message": why})
            if hostlink.running(agent) and retries < 5:
                # Activated but maybe not yet serving on its host: a short backoff.
                retries += 1
                await anyio.sleep(0.1 * 2**retries)
                continue
            retries = 0
            async for event in bus:
                if event["kind"] == "agent" and event.get("agent") == agent and event["running"]:
                    break
