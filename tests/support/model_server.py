"""A scripted Anthropic Messages API server for driving the real ``claude`` CLI.

Point claude at it with ``ANTHROPIC_BASE_URL=server.url`` and any
``ANTHROPIC_API_KEY``. Each *main* request is answered by the next entry of a
script (a list of :class:`Reply` / :class:`ApiError` / :class:`Stall`) or by a
callable ``request body -> answer``; every request is recorded, so a test can
assert on the ``tools`` array claude offered the model or on the messages it
sent back (tool results, a resumed history).

What claude 2.1.328 calls in ``--print`` mode (measured against this server):

- ``POST /v1/messages?beta=true`` — one per model call of the turn, always
  ``"stream": true`` (SSE). The body carries ``model``, ``system``,
  ``messages``, ``tools``, ``max_tokens``, ``thinking``, ``metadata`` …; the
  headers ``x-api-key``, ``anthropic-beta``, ``anthropic-version`` and
  ``x-claude-code-session-id``. ``/compact`` is an ordinary main request too
  (same ``tools``, a summary instruction as the last user message), so it
  consumes a script entry and the script provides the summary text.
- ``HEAD /api/hello`` — a connection pre-warm, unless
  ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` (then nothing but
  ``/v1/messages``). Answered 200 here.
- Nothing else was observed: no models list, no token count, no title or
  summary call with a small model. The binary does contain a ``quota`` probe
  (``max_tokens: 1``, no ``tools``) and a ``/v1/messages/count_tokens?beta=true``
  call for oversized MCP results; both are answered without touching the
  script, as is anything unknown (404, logged).

Main vs side request: a ``/v1/messages`` body with a ``tools`` key is main.
claude always sends the key for a conversation turn — even under ``--tools
""`` it is there, empty — while the side calls it knows how to make (the
quota probe, title generation in older releases) carry no tools at all. Side
requests get a short canned text reply.

Retries consume script entries: claude retries 401/429/5xx/529 (up to 10
times with backoff, ``CLAUDE_CODE_MAX_RETRIES`` overrides) and re-sends a 400
with fewer betas (three requests in all). For a persistent failure, script a
callable (``always(ApiError(...))``) rather than a list.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import anyio.to_thread
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = [
    "Answer",
    "ApiError",
    "ModelServer",
    "RecordedRequest",
    "Reply",
    "Script",
    "Stall",
    "Text",
    "ToolUse",
    "Usage",
    "always",
    "text",
    "tool_call",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Text:
    """A text content block."""

    text: str


@dataclass(frozen=True)
class ToolUse:
    """A ``tool_use`` block; ``id`` is generated when omitted."""

    name: str
    input: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None


Block = Text | ToolUse


@dataclass(frozen=True)
class Usage:
    """Token usage reported for one model call."""

    input_tokens: int = 10
    output_tokens: int = 5
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
        }


@dataclass(frozen=True)
class Reply:
    """One assistant message; ``stop_reason`` defaults from the blocks."""

    content: Sequence[Block]
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None

    @property
    def effective_stop_reason(self) -> str:
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if any(isinstance(b, ToolUse) for b in self.content) else "end_turn"


@dataclass(frozen=True)
class ApiError:
    """An HTTP error in the API's shape, e.g. ``ApiError(401, "authentication_error")``."""

    status: int
    type: str
    message: str = "scripted error"


@dataclass(frozen=True)
class Stall:
    """Hold the request open until ``release`` is set (or the server stops), then send ``then``.

    For tests that kill claude mid-turn: wait for the request to be recorded,
    then kill.
    """

    release: threading.Event = field(default_factory=threading.Event)
    then: Reply | ApiError | None = None


Answer = Reply | ApiError | Stall
Script = Sequence[Answer] | Callable[[dict[str, Any]], Answer]


def text(body: str, usage: Usage | None = None) -> Reply:
    """A reply with one text block."""
    return Reply([Text(body)], usage or Usage())


def tool_call(name: str, tool_input: Mapping[str, Any], usage: Usage | None = None) -> Reply:
    """A reply with one ``tool_use`` block."""
    return Reply([ToolUse(name, tool_input)], usage or Usage())


def always(answer: Answer) -> Callable[[dict[str, Any]], Answer]:
    """A script answering every main request the same way (survives retries)."""
    return lambda _body: answer


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it; ``main`` = consumed the script."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    main: bool
    client: str | None = None  # the caller's address (which network namespace it ran in)

    @property
    def tool_names(self) -> list[str]:
        """Names of the ``tools`` offered to the model (empty if none)."""
        tools = self.body.get("tools") if isinstance(self.body, dict) else None
        return [t["name"] for t in tools or []]

    @property
    def messages(self) -> list[dict[str, Any]]:
        msgs = self.body.get("messages") if isinstance(self.body, dict) else None
        return list(msgs or [])


_SIDE_REPLY = Reply([Text("ok")], Usage(1, 1))
_EXHAUSTED = Reply([Text("(model script exhausted)")])


class ModelServer:
    """The scripted server; a context manager (sync or async) running uvicorn in a thread.

    The socket is bound and listening on construction, so :attr:`url` is usable
    at once and connections made before the loop starts simply queue.
    """

    def __init__(self, script: Script = (), host: str = "127.0.0.1") -> None:
        """``host``: the address to listen on (another network namespace's claude needs
        one reachable from there, e.g. the test's end of a veth link)."""
        self._cond = threading.Condition()
        self._requests: list[RecordedRequest] = []
        self._script: list[Answer] | Callable[[dict[str, Any]], Answer] = []
        self._stalls: list[threading.Event] = []
        self.unscripted = 0
        self.set_script(script)
        # IPPROTO_TCP so asyncio sets TCP_NODELAY: no delayed-ACK stall per reply.
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.bind((host, 0))
        self._sock.listen(128)
        self.port: int = self._sock.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        config = uvicorn.Config(
            self._app(),
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    # -- script and records -------------------------------------------------

    def set_script(self, script: Script) -> None:
        """Replace what the following main requests get."""
        with self._cond:
            self._script = script if callable(script) else list(script)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request so far, in arrival order."""
        with self._cond:
            return list(self._requests)

    @property
    def main_requests(self) -> list[RecordedRequest]:
        """The requests that consumed the script (conversation turns)."""
        return [r for r in self.requests if r.main]

    def wait_for(
        self, predicate: Callable[[list[RecordedRequest]], bool], timeout: float = 10.0
    ) -> list[RecordedRequest]:
        """Block until ``predicate(requests)`` holds; ``TimeoutError`` after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self._requests):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"model server: condition not met in {timeout}s")
                self._cond.wait(remaining)
            return list(self._requests)

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> ModelServer:
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._sock]},
            name=f"model-server-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._cond:
            for release in self._stalls:
                release.set()
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self._sock.close()

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> ModelServer:
        return self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await anyio.to_thread.run_sync(self.stop)

    # -- the app ------------------------------------------------------------

    def _app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
                Route("/api/hello", self._hello, methods=["GET", "HEAD"]),
                Route(
                    "/{path:path}", self._unknown, methods=["GET", "POST", "PUT", "DELETE", "HEAD"]
                ),
            ]
        )

    async def _record(self, request: Request, *, main: Callable[[Any], bool]) -> RecordedRequest:
        raw = await request.body()
        body: Any
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        rec = RecordedRequest(
            method=request.method,
            path=request.url.path,
            query=dict(request.query_params),
            headers=dict(request.headers),
            body=body,
            main=main(body),
            client=request.client.host if request.client else None,
        )
        with self._cond:
            self._requests.append(rec)
            self._cond.notify_all()
        return rec

    async def _hello(self, request: Request) -> Response:
        await self._record(request, main=lambda _: False)
        return Response(status_code=200)

    async def _unknown(self, request: Request) -> Response:
        rec = await self._record(request, main=lambda _: False)
        log.warning("model server: unknown request %s %s", rec.method, rec.path)
        return _error(ApiError(404, "not_found_error", f"no route {rec.path}"))

    async def _count_tokens(self, request: Request) -> Response:
        rec = await self._record(request, main=lambda _: False)
        return JSONResponse({"input_tokens": max(1, len(json.dumps(rec.body)) // 4)})

    async def _messages(self, request: Request) -> Response:
        rec = await self._record(request, main=lambda b: isinstance(b, dict) and "tools" in b)
        body: dict[str, Any] = rec.body if isinstance(rec.body, dict) else {}
        answer = self._next_answer(body) if rec.main else _SIDE_REPLY
        if isinstance(answer, Stall):
            with self._cond:
                self._stalls.append(answer.release)
            await anyio.to_thread.run_sync(answer.release.wait)
            answer = answer.then or _EXHAUSTED
        if isinstance(answer, ApiError):
            return _error(answer)
        model = str(body.get("model", "claude-test"))
        if body.get("stream"):
            return StreamingResponse(_sse(answer, model), media_type="text/event-stream")
        return JSONResponse(_message(answer, model, streamed=False))

    def _next_answer(self, body: dict[str, Any]) -> Answer:
        with self._cond:
            script = self._script
            if callable(script):
                return script(body)
            if script:
                return script.pop(0)
            self.unscripted += 1
            return _EXHAUSTED


def _error(err: ApiError) -> Response:
    return JSONResponse(
        {"type": "error", "error": {"type": err.type, "message": err.message}},
        status_code=err.status,
        headers={"request-id": f"req_{uuid.uuid4().hex[:24]}"},
    )


def _block(block: Block) -> dict[str, Any]:
    if isinstance(block, Text):
        return {"type": "text", "text": block.text}
    return {
        "type": "tool_use",
        "id": block.id or f"toolu_{uuid.uuid4().hex[:24]}",
        "name": block.name,
        "input": dict(block.input),
    }


def _message(reply: Reply, model: str, *, streamed: bool) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [] if streamed else [_block(b) for b in reply.content],
        "stop_reason": None if streamed else reply.effective_stop_reason,
        "stop_sequence": None,
        "usage": reply.usage.as_dict(),
    }


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()


async def _sse(reply: Reply, model: str) -> AsyncIterator[bytes]:
    start = _message(reply, model, streamed=True)
    # As the real API does: output_tokens is final only in message_delta.
    start["usage"] = {**start["usage"], "output_tokens": 1}
    yield _event("message_start", {"message": start})
    for index, block in enumerate(reply.content):
        full = _block(block)
        if full["type"] == "text":
            yield _event(
                "content_block_start",
                {"index": index, "content_block": {"type": "text", "text": ""}},
            )
            delta = {"type": "text_delta", "text": full["text"]}
        else:
            yield _event(
                "content_block_start",
                {"index": index, "content_block": {**full, "input": {}}},
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(full["input"])}
        yield _event("content_block_delta", {"index": index, "delta": delta})
        yield _event("content_block_stop", {"index": index})
    yield _event(
        "message_delta",
        {
            "delta": {"stop_reason": reply.effective_stop_reason, "stop_sequence": None},
            "usage": reply.usage.as_dict(),
        },
    )
    yield _event("message_stop", {})
