"""Unix-socket JSON-lines servers: one listener per identity.

The listener a connection arrived on *is* the caller's identity; the
handler is bound to it when the listener is made. Frames on a connection
are handled concurrently (a long-poll never blocks its neighbours), each reply
is one whole write, and a bad frame gets an error reply naming
the problem — it never ends the connection or touches another one.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

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
from hyperhive.unixsock import listening_socket, unlink_if

__all__ = ["Dispatch", "Listeners", "answer", "serve_unix"]

log = logging.getLogger(__name__)

Dispatch = Callable[[Any], Awaitable[Any]]

# In-flight requests per connection; beyond it the reader waits (backpressure).
MAX_IN_FLIGHT = 32


def _traced(request: Any, dispatch: Dispatch, identity: str | None) -> Awaitable[Any]:
    """Dispatch; inside a span when the caller sent its trace context.

    A request without one (a long-poll ``wait``, ``hivectl``) makes no span,
    since a trace of every idle poll would bury the turns, and no coroutine of
    its own: the handler's is returned to await.
    """
    parent = context_from(getattr(request, "traceparent", None))
    if parent is None:
        return dispatch(request)
    return _in_span(request, dispatch, identity, parent)


async def _in_span(request: Any, dispatch: Dispatch, identity: str | None, parent: Any) -> Any:
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


def _encoded_ok(rid: int | str | None, result: Any) -> bytes:
    """A success, written straight from its result model."""
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


class _Connection(asyncio.Protocol):
    """One client on a listener: frames parsed as they arrive, one task per request.

    An ``asyncio.Protocol`` rather than a stream and a reader task: bytes are
    split and handlers started straight from ``data_received``, and a reply
    is written from its handler (one ``write`` of the whole frame, so replies
    never interleave). At ``MAX_IN_FLIGHT`` handlers the connection stops
    reading (backpressure) and queues the frames of the chunk in hand; while
    the client does not read its replies, handlers wait before writing.
    When the client goes, or the listener stops, its handlers are cancelled
    (a gone client's long-polls too).
    """

    def __init__(
        self, union: Any, dispatch: Dispatch, max_frame: int, identity: str | None
    ) -> None:
        self._union = union
        self._dispatch = dispatch
        self._identity = identity
        self._decoder = FrameDecoder(max_frame)
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self.tasks: set[asyncio.Task[None]] = set()
        self._queued: deque[bytes] = deque()
        self._reading = True
        self._writable: asyncio.Future[None] | None = None  # set while the client lags
        self.closed = self._loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's is not an ``asyncio.Transport`` subclass).
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        for frame in self._decoder.feed(data):
            if isinstance(frame, HiveError):
                self._write(_encoded(error_response(None, frame)))
            elif self._queued or len(self.tasks) >= MAX_IN_FLIGHT:
                self._queued.append(frame)
            else:
                self._start(frame)
        if self._queued and self._reading and self._transport is not None:
            self._reading = False
            self._transport.pause_reading()

    def eof_received(self) -> bool:
        return False  # the client finished sending: close (its handlers are cancelled)

    def connection_lost(self, exc: Exception | None) -> None:
        self._queued.clear()
        for task in self.tasks:
            task.cancel()
        self._wake_writers()
        if not self.closed.done():
            self.closed.set_result(None)

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        self._wake_writers()

    def abort(self) -> None:
        """The listener is stopping: drop the client (``connection_lost`` follows)."""
        if self._transport is not None:
            self._transport.abort()

    def _wake_writers(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    def _start(self, frame: bytes) -> None:
        task = self._loop.create_task(self._handle(frame))
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("a request handler failed", exc_info=task.exception())
        while self._queued and len(self.tasks) < MAX_IN_FLIGHT:
            self._start(self._queued.popleft())
        if not self._queued and not self._reading and self._transport is not None:
            self._reading = True
            if not self._transport.is_closing():
                self._transport.resume_reading()

    def _write(self, data: bytes) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)

    async def _handle(self, frame: bytes) -> None:
        """:func:`answer`, encoded and written (inline: one coroutine per request)."""
        rid: int | str | None = None
        request: Any = None
        try:
            rid, request = decode_frame(self._union, frame)
            result = await _traced(request, self._dispatch, self._identity)
        except Exception as exc:
            line = _encoded(_failure(exc, frame, rid, request))
        else:
            line = _encoded_ok(rid, result)
        while self._writable is not None:  # the client is not reading: wait for room
            await asyncio.shield(self._writable)
        self._write(line)


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
    """Listen on ``path`` (mode 0600, optionally chowned) until cancelled.

    The mode is set between ``bind`` and ``listen``: nobody can connect before
    the socket file has its final permissions.
    """
    sock, made = listening_socket(path, mode, owner)
    live: set[_Connection] = set()

    def accept() -> _Connection:
        conn = _Connection(union, dispatch, max_frame, identity)
        live.add(conn)
        conn.closed.add_done_callback(lambda _: live.discard(conn))
        return conn

    try:
        server = await asyncio.get_running_loop().create_unix_server(accept, sock=sock)
    except BaseException:
        unlink_if(path, made)
        sock.close()
        raise
    try:
        task_status.started()
        await anyio.sleep_forever()
    finally:
        server.close()
        # Nothing listens on it any more (a successor's socket on the same path is kept).
        unlink_if(path, made)
        # Stopping: every client is dropped and its handlers unwind before we return.
        with anyio.CancelScope(shield=True):
            for conn in list(live):
                conn.abort()
            pending = [t for conn in live for t in conn.tasks]
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)


class Listeners:
    """Listeners that come and go at run time (one per agent), each cancellable."""

    def __init__(self, tg: TaskGroup) -> None:
        self._tg = tg
        self._scopes: dict[str, anyio.CancelScope] = {}
        # Set once each listener listens: a second ``add`` of a key returns only then.
        self._listening: dict[str, anyio.Event] = {}

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
        """Serve ``path`` for ``key``; return once it listens (also when another ``add``
        of ``key`` is still starting it: its caller may be about to start the agent)."""
        if key in self._scopes:
            await self._listening[key].wait()
            if key in self._scopes:
                return
            # That start failed: try again, and say why if it fails again.
        scope = anyio.CancelScope()
        self._scopes[key] = scope
        listening = self._listening[key] = anyio.Event()

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

        try:
            await self._tg.start(run)
        except BaseException:
            if self._scopes.get(key) is scope:
                del self._scopes[key]
                del self._listening[key]
            raise
        finally:
            listening.set()  # or failed: a waiting ``add`` must not wait for ever

    def remove(self, key: str) -> None:
        scope = self._scopes.pop(key, None)
        self._listening.pop(key, None)
        if scope is not None:
            scope.cancel()
