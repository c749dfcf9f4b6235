"""``tools/call`` at a single-exchange protocol version, without the SDK's per-request kit.

claude speaks protocol 2026-07-28 to our surfaces: every call is one
self-contained POST (no session). The SDK answers it through a per-request
``Connection``, runner, session and context, a middleware chain, a shielded
cancel scope and a deep copy of the server-info stamp: about half of the host's
CPU per call (``bench.profile_mcp``). This path answers the ordinary call —
a well-formed ``tools/call`` to a tool the surface declares — with the SDK's
own checks and serialization and none of that kit:

- the same transport checks, by the SDK's own functions and in its order:
  body size, then content type, Host and Origin (DNS rebinding) and Accept,
  each combination of those header values judged once and remembered while it
  passes (a repeated header of any kind goes to the SDK, which judges
  duplicated routing headers); a request they refuse gets the SDK's own
  refusal from here, so its warning is logged once;
- the inbound ladder (``_meta`` envelope, ``mcp-method``/``mcp-name`` and
  protocol-version headers), the per-version request schema and the
  ``CallToolRequestParams`` model;
- the same result: ``serialize_server_result`` at the request's version,
  ``resultType``, the ``serverInfo`` stamp, the JSON-RPC envelope, compact JSON,
  shaped once per version and outcome with the call's id and text put in.

One thing it does that the SDK does not: a call to a tool declared
``cancel_on_hangup`` (bash ``run``/``status``, whose answer hands over a task's
end) is cancelled when its caller hangs up mid-call (claude killed in a tool
call), so the task's end comes back as a todo instead of going to nobody.

Anything else — another method, a notification, a batch, a request any later
check refuses, an unknown tool, an ``Mcp-Param-*`` header, a live OpenTelemetry
provider (the SDK's span is kept then) — goes to the SDK unchanged, with the
body already read replayed to it, so every error is the SDK's own.
Authentication and the group gate are untouched: the web layer authenticated
the request before either path, and the surface gates the call on both.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http import check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
from mcp_types import SERVER_INFO_META_KEY, JSONRPCRequest, RequestId
from mcp_types import methods as _methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry import trace
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from hyperhive.tools.decl import Tool


class Served(Protocol):
    """What the fast path needs of its surface (``mcp_surface.Surface``; a Protocol, so
    the two modules do not import each other)."""

    @property
    def manager(self) -> StreamableHTTPSessionManager: ...

    @property
    def server(self) -> Server[Any]: ...

    @property
    def tools(self) -> Mapping[str, Tool[Any, Any]]: ...

    def agent(self, principal: str) -> Any | None: ...

    async def outcome(
        self, agent: Any, name: str, arguments: dict[str, Any]
    ) -> tuple[bool, str]: ...


__all__ = ["FastCall", "sdk_spans"]

_METHOD = "tools/call"
_PARAM_HEADER = "\nmcp-param-"  # at the start of a header's name
# Distinct transport-header combinations whose checks passed, kept so each is judged once.
_KEEP_PASSED = 64
# Stand-ins for the two values of a result that vary per call (see ``FastCall._shape``).
_ID_MARK = "\x00hyperhive-id\x00"
_TEXT_MARK = "\x00hyperhive-text\x00"
_JSON = [(b"content-type", b"application/json")]
_T = TypeVar("_T")


def sdk_spans() -> bool:
    """Whether the SDK's own spans record: only once a global OpenTelemetry provider is set.

    The hive keeps its tracer apart from the global one (``telemetry.tracing``),
    so in a host the SDK's per-request span is otherwise a no-op that still costs.
    """
    provider = trace.get_tracer_provider()
    return not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


@dataclass(frozen=True, slots=True)
class _Call:
    id: RequestId
    version: str
    params: types.CallToolRequestParams


class FastCall:
    """The fast path of one surface (see the module's docstring)."""

    def __init__(self, surface: Served) -> None:
        self.surface = surface
        manager = surface.manager
        if not manager.json_response:  # an SSE-mode answer is the SDK's to shape
            raise ValueError("the fast path answers in JSON-response mode only")
        self._security = TransportSecurityMiddleware(manager.security_settings)
        self._limit = manager.max_request_body_size
        self._stamp = surface.server.server_info_stamp
        # The SDK validates Mcp-Param-* headers against a schema that declares x-mcp-header;
        # ours declare none, and a tool that ever does is left to the SDK.
        self._plain = {
            n for n, t in surface.tools.items() if "x-mcp-header" not in repr(t.schema())
        }
        self._watched = {n for n, t in surface.tools.items() if t.cancel_on_hangup}
        # (content-type, host, origin, accept) values the SDK's transport checks passed:
        # the checks read nothing else, so the same values pass again.
        self._passed: set[tuple[str | None, ...]] = set()
        # (version, ok) -> the response around the id and the text (``_shape``).
        self._shapes: dict[tuple[str, bool], tuple[bytes, bytes, bytes]] = {}
        self.answered = 0
        """Calls this path answered itself (the rest went to the SDK)."""

    async def __call__(
        self, principal: str, scope: Scope, receive: Receive, send: Send
    ) -> Receive | None:
        """Answer the request (None), or the ``receive`` to hand the SDK instead."""
        if scope["method"] != "POST":
            return receive
        raw: list[tuple[bytes, bytes]] = scope["headers"]
        # One folded read of the headers; a repeated one (where first- and last-copy
        # readers could disagree) is the SDK's to judge.
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in raw}
        if (
            len(headers) != len(raw)
            or headers.get("mcp-protocol-version") not in MODERN_PROTOCOL_VERSIONS
            or headers.get("mcp-method") != _METHOD
            or sdk_spans()
            or _PARAM_HEADER in "\n" + "\n".join(headers)  # one look at every name
        ):
            return receive
        # The SDK's order: its body limit, then the transport checks.
        body, replay = await _read_body(receive, headers.get("content-length"), self._limit)
        if body is None:
            return replay
        passed = tuple(map(headers.get, ("content-type", "host", "origin", "accept")))
        if passed not in self._passed:
            request = Request(scope)
            refused = await self._security.validate_request(request, is_post=True)
            if refused is not None:
                # The SDK's own answer, here: handing over would judge (and warn) twice.
                await refused(scope, replay, send)
                return None
            if not check_accept_headers(request)[0]:
                return replay
            if len(self._passed) >= _KEEP_PASSED:
                self._passed.clear()
            self._passed.add(passed)
        call = self._parse(body, headers)
        agent = self.surface.agent(principal) if call is not None else None
        if call is None or agent is None or call.params.name not in self._plain:
            return replay
        name = call.params.name
        running = self.surface.outcome(agent, name, call.params.arguments or {})
        outcome = await (_unless_hung_up(receive, running) if name in self._watched else running)
        if outcome is None:
            return None  # the caller hung up mid-call: nobody reads an answer
        ok, text = outcome
        self.answered += 1
        answer = self._wire(call, ok, text)
        headers_out = [(b"content-length", str(len(answer)).encode()), *_JSON]
        await send({"type": "http.response.start", "status": 200, "headers": headers_out})
        await send({"type": "http.response.body", "body": answer})
        return None

    @staticmethod
    def _parse(body: bytes, headers: Mapping[str, str]) -> _Call | None:
        """The call, or None: not an ordinary one, the SDK answers it."""
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError):
            return None
        if not isinstance(decoded, dict) or "id" not in decoded:
            return None
        try:
            req = JSONRPCRequest.model_validate(decoded)
        except ValidationError:
            return None
        if req.method != _METHOD:
            return None
        verdict = classify_inbound_request(decoded, headers=headers)
        if isinstance(verdict, InboundLadderRejection):
            return None
        version = verdict.protocol_version
        try:
            _methods.validate_client_request(_METHOD, version, req.params)
            params = types.CallToolRequestParams.model_validate(req.params or {}, by_name=False)
        except (KeyError, ValueError):  # ValidationError is a ValueError
            return None
        return _Call(req.id, version, params)

    def _wire(self, call: _Call, ok: bool, text: str) -> bytes:
        """The response body, as the SDK shapes it at ``call``'s version."""
        shape = self._shapes.get((call.version, ok))
        if shape is None:
            shape = self._shapes[call.version, ok] = self._shape(call.version, ok)
        head, middle, tail = shape
        return b"".join(
            (head, json.dumps(call.id).encode(), middle, json.dumps(text).encode(), tail)
        )

    def _shape(self, version: str, ok: bool) -> tuple[bytes, bytes, bytes]:
        """A result at ``version`` by the SDK's serializer, cut around its id and text.

        A text result varies per call only in those two values (a JSON string and
        number or string, passed through unchanged), so the rest is shaped once.
        """
        result = types.CallToolResult(
            content=[types.TextContent(type="text", text=_TEXT_MARK)], is_error=not ok
        )
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        wire = _methods.serialize_server_result(_METHOD, version, dumped)
        wire.setdefault("resultType", "complete")
        # Ours never sets _meta, so the stamp is the whole of it (the SDK's rule, simplified).
        wire["_meta"] = {SERVER_INFO_META_KEY: self._stamp}
        # JSONRPCResponse's dump, field for field (a request's id is never None).
        out = {"jsonrpc": "2.0", "id": _ID_MARK, "result": wire}
        shaped = json.dumps(out, separators=(",", ":")).encode()
        head, rest = _cut(shaped, _ID_MARK)
        middle, tail = _cut(rest, _TEXT_MARK)
        return head, middle, tail


def _cut(text: bytes, mark: str) -> tuple[bytes, bytes]:
    before, found, after = text.partition(json.dumps(mark).encode())
    if not found or json.dumps(mark).encode() in after:
        raise RuntimeError(f"the SDK's result shape holds {mark!r} other than once")
    return before, after


async def _unless_hung_up(receive: Receive, call: Awaitable[_T]) -> _T | None:
    """``call``'s value; None (and ``call`` cancelled) if the client disconnects first.

    A caller that hung up mid-call (claude killed during a tool call) reads no
    answer, so the call is cancelled as if its own caller were: a tool that owes
    its result to whoever reads it hands it on another way (``run`` cut off in its
    inline wait files its task's end as a todo). The body is read by now, so the
    server's next message is the disconnect (uvicorn sends it at the response's
    end too, once this has returned).
    """
    value: list[_T] = []
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        value.append(await call)
        tg.cancel_scope.cancel()
    return value[0] if value else None


async def _read_body(
    receive: Receive, content_length: str | None, limit: int
) -> tuple[bytes | None, Receive]:
    """The whole body if it is within ``limit``; and a receive replaying what was read.

    A body over the limit (declared or counted) is not read further: the SDK's
    own limit answers it from the replay (413).
    """
    read: deque[Message] = deque()

    async def replay() -> Message:
        return read.popleft() if read else await receive()

    if content_length is not None:
        try:
            if int(content_length) > limit:
                return None, receive
        except ValueError:
            pass
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        read.append(message)
        if message["type"] != "http.request":
            return None, replay
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None, replay
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    read.clear()
    # The SDK's handler reads the request once more after this if it falls back.
    read.append({"type": "http.request", "body": body, "more_body": False})
    return body, replay
