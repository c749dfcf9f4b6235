"""Unix-socket JSON-lines servers: one listener per identity.

The listener a connection arrived on *is* the caller's identity; the
handler is bound to it when the listener is made. Frames on a connection
are handled concurrently (a long-poll never blocks its neighbours), replies
are written whole under a lock, and a bad frame gets an error reply naming
the problem — it never ends the connection or touches another one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus
from opentelemetry.trace import SpanKind, Status, StatusCode

from hyperhive.errors import HiveError, InternalError
from hyperhive.framing import FrameDecoder
from hyperhive.protocol import (
    Response,
    decode_frame,
    encode,
    encode_ok,
    error_response,
    ok_response,
)
from hyperhive.telemetry import context_from, tracer
from hyperhive.unixsock import UnixStream, serve_unix_streams

__all__ = ["Dispatch", "Listeners", "answer", "answer_line", "serve_connection", "serve_unix"]

log = logging.getLogger(__name__)

Dispatch = Callable[[Any], Awaitable[Any]]

# In-flight requests per connection; beyond it the reader waits (backpressure).
MAX_IN_FLIGHT = 32


class _Writer:
    """Whole replies onto one connection, from its concurrent handlers.

    No lock: a reply is one ``write`` of the whole frame into the transport's
    buffer, so replies never interleave, and ``drain`` (backpressure) may be
    awaited by several handlers at once. An anyio lock here cost a trip round
    the event loop per reply even when nobody held it.
    """

    def __init__(self, stream: UnixStream) -> None:
        self.stream = stream

    async def send(self, response: Response) -> None:
        await self.send_line(_encoded(response))

    async def send_line(self, data: bytes) -> None:
        try:
            await self.stream.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the client went away; its answer has nowhere to go


async def _traced(request: Any, dispatch: Dispatch, identity: str | None) -> Any:
    """Dispatch; inside a span when the caller sent its trace context.

    A request without one (a long-poll ``wait``, ``hivectl``) makes no span:
    a trace of every idle poll would bury the turns.
    """
    parent = context_from(getattr(request, "traceparent", None))
    if parent is None:
        return await dispatch(request)
    cmd = getattr(request, "cmd", "request")
    with tracer().start_as_current_span(
        f"coordinator {cmd}",
        context=parent,
        kind=SpanKind.SERVER,
        attributes={"hyperhive.cmd": cmd, "hyperhive.caller": identity or "operator"},
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            return await dispatch(request)
        except HiveError as exc:
            span.set_status(Status(StatusCode.ERROR, exc.code))
            span.set_attribute("hyperhive.error", exc.message[:300])
            raise


async def answer(
    line: bytes, union: Any, dispatch: Dispatch, identity: str | None = None
) -> Response:
    """The response to one request frame; never raises for a bad frame or a handler's bug."""
    rid: int | str | None = None
    request: Any = None
    try:
        rid, request = decode_frame(union, line)
        return ok_response(rid, await _traced(request, dispatch, identity))
    except Exception as exc:
        return _failure(exc, line, rid, request)


async def answer_line(
    line: bytes, union: Any, dispatch: Dispatch, identity: str | None = None
) -> bytes:
    """:func:`answer`, encoded: a success is written straight from its result model."""
    rid: int | str | None = None
    request: Any = None
    try:
        rid, request = decode_frame(union, line)
        result = await _traced(request, dispatch, identity)
    except Exception as exc:
        return _encoded(_failure(exc, line, rid, request))
    try:
        return encode_ok(rid, result)
    except Exception:  # a reply that cannot be encoded must not take the server down
        log.exception("could not encode a reply; sending a generic error instead")
        return _encoded(error_response(rid, HiveError("internal error: unencodable reply")))


def _failure(exc: Exception, line: bytes, rid: int | str | None, request: Any) -> Response:
    if isinstance(exc, HiveError):
        return error_response(exc.request_id if exc.request_id is not None else rid, exc)
    # A bug must answer, log, and spare the connection.
    log.error("internal error handling %r", line[:200], exc_info=exc)
    what = getattr(request, "cmd", None) if request is not None else None
    return error_response(
        rid,
        InternalError(
            f"internal error{f' in {what!r}' if what else ''}: "
            f"{type(exc).__name__}: {exc} (the coordinator's log has the traceback)"
        ),
    )


def _encoded(response: Response) -> bytes:
    try:
        return encode(response)
    except Exception:
        log.exception("could not encode a reply; sending a generic error instead")
        return encode(error_response(None, HiveError("internal error: unencodable reply")))


class _Frames:
    """One connection's in-flight handlers: plain asyncio tasks, at most ``MAX_IN_FLIGHT``.

    Why not an anyio task group: spawning into one cost a cancel scope, a task
    status and a name lookup per frame (~14% of a send's coordinator CPU); a
    bare task plus a done-callback does the same job here.
    """

    __slots__ = ("_free", "_room", "tasks")

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[None]] = set()
        self._free = MAX_IN_FLIGHT
        self._room: asyncio.Future[None] | None = None

    async def start(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` as a handler; wait first while the connection is saturated."""
        try:
            while self._free <= 0:  # backpressure: stop reading until a handler finishes
                self._room = asyncio.get_running_loop().create_future()
                await self._room
        except BaseException:
            coro.close()  # never started: no "never awaited" warning
            raise
        self._free -= 1
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        self._free += 1
        if self._room is not None and not self._room.done():
            self._room.set_result(None)
        if not task.cancelled() and task.exception() is not None:
            log.error("a request handler failed", exc_info=task.exception())

    async def abandon(self) -> None:
        """Cancel every handler still running (the client is gone) and let them unwind."""
        if not self.tasks:
            return
        pending = list(self.tasks)
        for task in pending:
            task.cancel()
        with anyio.CancelScope(shield=True):
            await asyncio.wait(pending)


async def _handle(
    line: bytes, union: Any, dispatch: Dispatch, writer: _Writer, identity: str | None
) -> None:
    await writer.send_line(await answer_line(line, union, dispatch, identity))


async def serve_connection(
    stream: UnixStream,
    union: Any,
    dispatch: Dispatch,
    max_frame: int,
    identity: str | None = None,
) -> None:
    """Serve one client until it disconnects (``identity``: the agent the socket is for)."""
    writer = _Writer(stream)
    decoder = FrameDecoder(max_frame)
    frames = _Frames()
    async with stream:
        try:
            while True:
                try:
                    chunk = await stream.receive(65536)
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    break
                for frame in decoder.feed(chunk):
                    if isinstance(frame, HiveError):
                        await writer.send(error_response(None, frame))
                        continue
                    await frames.start(_handle(frame, union, dispatch, writer, identity))
        finally:
            await frames.abandon()  # the client is gone (or we are stopping): its long-polls too


async def serve_unix(
    path: Path,
    union: Any,
    dispatch: Dispatch,
    max_frame: int,
    *,
    mode: int = 0o600,
    owner: tuple[int, int] | None = None,
    identity: str | None = None,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on ``path`` (mode 0600, optionally chowned) until cancelled."""
    await serve_unix_streams(
        path,
        lambda stream: serve_connection(stream, union, dispatch, max_frame, identity),
        mode=mode,
        owner=owner,
        task_status=task_status,
    )


class Listeners:
    """Listeners that come and go at run time (one per agent), each cancellable."""

    def __init__(self, tg: TaskGroup) -> None:
        self._tg = tg
        self._scopes: dict[str, anyio.CancelScope] = {}

    def __contains__(self, key: str) -> bool:
        return key in self._scopes

    async def add(
        self,
        key: str,
        path: Path,
        union: Any,
        dispatch: Dispatch,
        max_frame: int,
        owner: tuple[int, int] | None = None,
    ) -> None:
        if key in self._scopes:
            return
        scope = anyio.CancelScope()
        self._scopes[key] = scope

        async def run(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            with scope:
                await serve_unix(
                    path,
                    union,
                    dispatch,
                    max_frame,
                    owner=owner,
                    identity=key,
                    task_status=task_status,
                )

        await self._tg.start(run)

    def remove(self, key: str) -> None:
        scope = self._scopes.pop(key, None)
        if scope is not None:
            scope.cancel()
