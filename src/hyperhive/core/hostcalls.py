"""Asks and streams the coordinator opens on a host's link (see ``protocol.hostreads``).

An ask waits for the host's one ``answer``, validated into the model its
:class:`~hyperhive.protocol.hostreads.Ask` names (an answer that is not one is
the host's failure, said as such); a stream hands the host's
batches to one reader through a small bounded queue, and holds the host's
acknowledgement while the queue is full, so a slow reader slows the host's
feed rather than growing a buffer here. Both are tied to the host
connection they were opened on: another host's answer or batch is refused,
and when the host goes, its asks fail and its streams end with the reason.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic import BaseModel, JsonValue, ValidationError

from hyperhive.errors import HiveError, PermissionDenied, Unavailable, error_from_code
from hyperhive.protocol import result_adapter
from hyperhive.protocol.hostreads import (
    Ask,
    LinkAnswerReq,
    LinkStreamEndReq,
    LinkStreamItemsReq,
    StreamStopCmd,
)

__all__ = ["HostCalls", "StreamEnded"]

# Batches a stream's reader may be behind by before the host's feed waits.
STREAM_QUEUE = 8

Push = Callable[[str, BaseModel], Awaitable[None]]
Batch = list[dict[str, JsonValue]]
R = TypeVar("R")


class StreamEnded(HiveError):
    """The host ended a stream on its side (the agent stopped); the message says why."""

    code = "stream_ended"


@dataclass
class _Ask:
    host: str
    done: anyio.Event = field(default_factory=anyio.Event)
    answer: LinkAnswerReq | None = None
    failure: HiveError | None = None


@dataclass
class _Stream:
    host: str
    send: MemoryObjectSendStream[Batch]
    end: HiveError | None = None


class HostCalls:
    def __init__(self, push: Push) -> None:
        self._push = push
        self._ids = itertools.count(1)
        self._asks: dict[int, _Ask] = {}
        self._streams: dict[int, _Stream] = {}

    async def ask(self, host: str, make: Callable[[int], Ask[R]], within: float, what: str) -> R:
        """Push ``make(ask_id)`` to ``host`` and return its answer, as the ask's model."""
        ask_id = next(self._ids)
        pending = self._asks[ask_id] = _Ask(host)
        request = make(ask_id)
        try:
            await self._push(host, request)
            with anyio.move_on_after(within):
                await pending.done.wait()
        finally:
            self._asks.pop(ask_id, None)
        if pending.failure is not None:
            raise pending.failure
        if pending.answer is None:
            raise Unavailable(f"agent host {host} did not answer {what} within {within:.0f}s")
        if pending.answer.error is not None:
            raise error_from_code(pending.answer.error.code, pending.answer.error.message)
        try:
            answer: R = result_adapter(type(request)).validate_python(pending.answer.result)
        except ValidationError as exc:
            raise Unavailable(f"agent host {host} answered {what} with {exc}") from None
        return answer

    @asynccontextmanager
    async def stream(
        self, host: str, make: Callable[[int], BaseModel]
    ) -> AsyncIterator[AsyncIterator[Batch]]:
        """Open ``make(stream_id)`` on ``host``; iterate its batches. The iteration ends
        by raising ``StreamEnded`` (the host's reason) or ``Unavailable`` (host gone)."""
        stream_id = next(self._ids)
        send, receive = anyio.create_memory_object_stream[Batch](STREAM_QUEUE)
        entry = self._streams[stream_id] = _Stream(host, send)
        try:
            await self._push(host, make(stream_id))
            yield self._batches(entry, receive)
        finally:
            live = self._streams.pop(stream_id, None) is not None and entry.end is None
            send.close()
            receive.close()
            if live:
                with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                    try:
                        await self._push(host, StreamStopCmd(cmd="stream_stop", stream=stream_id))
                    except (HiveError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                        pass  # the host is going: its streams go with it

    @staticmethod
    async def _batches(
        entry: _Stream, receive: MemoryObjectReceiveStream[Batch]
    ) -> AsyncIterator[Batch]:
        async for batch in receive:
            yield batch
        if entry.end is not None:
            raise entry.end

    # ---- the host's side, called from the link's dispatch --------------------------------

    def answered(self, host: str, req: LinkAnswerReq) -> None:
        pending = self._asks.get(req.ask)
        if pending is None:
            return  # late (the ask timed out) or never made: nobody waits for it
        if pending.host != host:
            raise PermissionDenied(f"ask {req.ask} was not made of agent host {host}")
        pending.answer = req
        pending.done.set()

    async def items(self, host: str, req: LinkStreamItemsReq) -> None:
        entry = self._own(host, req.stream)
        if entry is None:
            raise Unavailable(f"stream {req.stream} is closed: stop feeding it")
        try:
            await entry.send.send(req.items)  # waits while the reader is behind
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise Unavailable(f"stream {req.stream} is closed: stop feeding it") from exc

    def ended(self, host: str, req: LinkStreamEndReq) -> None:
        entry = self._own(host, req.stream)
        if entry is not None:
            self._finish(req.stream, entry, StreamEnded(req.reason))

    def host_gone(self, host: str) -> None:
        """``host``'s link ended: its asks fail, its streams end, with that reason."""
        why = Unavailable(f"agent host {host} went away (its link to the coordinator closed)")
        for pending in self._asks.values():
            if pending.host == host and not pending.done.is_set():
                pending.failure = why
                pending.done.set()
        for stream_id, entry in list(self._streams.items()):
            if entry.host == host:
                self._finish(stream_id, entry, why)

    def _own(self, host: str, stream_id: int) -> _Stream | None:
        entry = self._streams.get(stream_id)
        if entry is not None and entry.host != host:
            raise PermissionDenied(f"stream {stream_id} was not opened on agent host {host}")
        return entry

    def _finish(self, stream_id: int, entry: _Stream, why: HiveError) -> None:
        entry.end = why
        self._streams.pop(stream_id, None)
        entry.send.close()
