"""A multiplexing JSON-lines client for the coordinator's unix sockets.

One connection carries many concurrent requests (a harness's long-poll
``wait`` does not block its MCP surface's ``send``): each request gets an id,
a reader task routes responses back by id. Results come back as the response
model the request names (``call(SendReq(...))`` is a ``Sent``), errors as the
typed ``HiveError`` the coordinator raised.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
from anyio.abc import TaskGroup
from pydantic import BaseModel, JsonValue, ValidationError

from hyperhive.errors import (
    FrameTooLarge,
    HiveError,
    MalformedFrame,
    NotListening,
    Unavailable,
    error_from_code,
)
from hyperhive.framing import DEFAULT_MAX_FRAME, FrameDecoder
from hyperhive.protocol import Req, Response, encode, result_adapter
from hyperhive.streams import ByteStream
from hyperhive.telemetry import traceparent
from hyperhive.unixsock import connect_unix

__all__ = ["RpcClient", "call_once", "connect", "over_stream"]

R = TypeVar("R")


def _typed(request: Req[R], result: JsonValue) -> R:
    try:
        value: R = result_adapter(type(request)).validate_python(result)
    except ValidationError as exc:
        raise MalformedFrame(
            f"the coordinator's answer to {type(request).__name__} does not fit its "
            f"response type (client and coordinator of different versions?): {exc}"
        ) from exc
    return value


class RpcClient:
    """A connected client; use :func:`connect` to get one."""

    def __init__(
        self,
        stream: ByteStream,
        tg: TaskGroup,
        max_frame: int,
        on_push: Callable[[dict[str, Any]], None] | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self._stream = stream
        self._tg = tg
        self._max_frame = max_frame
        self._ids = itertools.count(1)
        self._waiters: dict[int, tuple[anyio.Event, list[Response]]] = {}
        self._send_lock = anyio.Lock()
        self._closed: HiveError | None = None
        self._on_push = on_push
        self._on_close = on_close

    @property
    def closed(self) -> bool:
        """The peer has gone: every further call raises ``Unavailable``."""
        return self._closed is not None

    async def call(self, request: Req[R]) -> R:
        """Send ``request`` and return its result as the request's response type."""
        return _typed(request, await self.call_raw(request))

    async def call_raw(self, request: BaseModel) -> JsonValue:
        """Send ``request`` and return its ``result`` as JSON (the wire shape, unvalidated)."""
        rid = next(self._ids)
        update: dict[str, Any] = {"id": rid}
        parent = traceparent()
        if parent is not None and "traceparent" in type(request).model_fields:
            update["traceparent"] = parent  # the coordinator's span joins the caller's trace
        return await self._roundtrip(rid, encode(request.model_copy(update=update)))

    async def call_json(self, frame: dict[str, Any]) -> JsonValue:
        """Send an arbitrary JSON object as a request (for probing the server's checks)."""
        rid = next(self._ids)
        return await self._roundtrip(rid, json.dumps({**frame, "id": rid}).encode() + b"\n")

    async def _roundtrip(self, rid: int, frame: bytes) -> JsonValue:
        if self._closed is not None:
            raise self._closed
        if len(frame) > self._max_frame:
            # The peer would drop it unread (no id to answer): refuse here, with a reason.
            raise FrameTooLarge(
                f"request is {len(frame)} bytes; the limit is {self._max_frame} bytes per frame "
                "(large payloads belong in files)"
            )
        event = anyio.Event()
        box: list[Response] = []
        self._waiters[rid] = (event, box)
        try:
            async with self._send_lock:
                await self._stream.send(frame)
            await event.wait()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise Unavailable(f"connection to the coordinator lost: {exc}") from exc
        finally:
            self._waiters.pop(rid, None)
        if not box:
            raise self._closed or Unavailable("connection to the coordinator closed")
        response = box[0]
        if not response.ok:
            info = response.error
            raise error_from_code(info.code if info else "hive_error", info.message if info else "")
        return response.result

    async def send_raw(self, data: bytes) -> None:
        """Write raw bytes (tests and fuzzers use this to send malformed frames)."""
        async with self._send_lock:
            await self._stream.send(data)

    async def _read_loop(self) -> None:
        decoder = FrameDecoder(self._max_frame)
        try:
            while True:
                try:
                    chunk = await self._stream.receive(65536)
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    break
                for frame in decoder.feed(chunk):
                    if isinstance(frame, HiveError):
                        continue
                    self._dispatch(frame)
        finally:
            self._closed = Unavailable("the coordinator closed the connection")
            for event, _ in list(self._waiters.values()):
                event.set()
            if self._on_close is not None:
                self._on_close()

    def _dispatch(self, frame: bytes) -> None:
        try:
            data = json.loads(frame)
        except ValueError:
            return
        if isinstance(data, dict) and "cmd" in data:
            # A command the peer pushes (the host link's activate/deactivate).
            if self._on_push is not None:
                self._on_push(data)
            return
        try:
            response = Response.model_validate(data)
        except ValidationError:
            return
        if isinstance(response.id, int) and response.id in self._waiters:
            event, box = self._waiters[response.id]
            box.append(response)
            event.set()

    async def aclose(self) -> None:
        await self._stream.aclose()


@asynccontextmanager
async def connect(
    path: Path,
    max_frame: int = DEFAULT_MAX_FRAME,
    on_push: Callable[[dict[str, Any]], None] | None = None,
    on_close: Callable[[], None] | None = None,
) -> AsyncIterator[RpcClient]:
    """Connect to a coordinator socket for the duration of the block."""
    try:
        stream = await connect_unix(path)
    except (ConnectionRefusedError, FileNotFoundError) as exc:
        # Nothing listens (a file left by a kill -9, or none yet): nothing was sent.
        raise NotListening(
            f"cannot connect to {path}: {exc.strerror or exc}; is the coordinator running "
            "(hivectl serve / hivectl up)?"
        ) from exc
    except OSError as exc:
        raise Unavailable(
            f"cannot connect to {path}: {exc.strerror or exc}; is the coordinator running "
            "(hivectl serve / hivectl up)?"
        ) from exc
    async with over_stream(stream, max_frame, on_push, on_close) as client:
        yield client


@asynccontextmanager
async def over_stream(
    stream: ByteStream,
    max_frame: int = DEFAULT_MAX_FRAME,
    on_push: Callable[[dict[str, Any]], None] | None = None,
    on_close: Callable[[], None] | None = None,
) -> AsyncIterator[RpcClient]:
    """An ``RpcClient`` over an already connected stream (closed when the block ends)."""
    try:
        async with anyio.create_task_group() as tg:
            client = RpcClient(stream, tg, max_frame, on_push, on_close)
            tg.start_soon(client._read_loop)
            try:
                yield client
            finally:
                await client.aclose()
                tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # The reader never fails, so a group here only wraps the caller's own error.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


async def call_once(path: Path, request: Req[R], within: float = 30.0) -> R:
    """Connect, make one call, disconnect; ``Unavailable`` if no answer ``within`` seconds."""
    with anyio.move_on_after(within):
        async with connect(path) as client:
            return await client.call(request)
    raise Unavailable(f"no answer from {path} within {within:.0f}s; is the coordinator stuck?")
