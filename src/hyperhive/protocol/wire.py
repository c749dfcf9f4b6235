"""Responses, encoding and decoding of frames (the JSON-lines side of the schema)."""

from __future__ import annotations

import functools
import json
import re
from typing import Any, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    JsonValue,
    TypeAdapter,
    ValidationError,
)

from hyperhive.errors import HiveError, MalformedFrame, UnknownCommand
from hyperhive.protocol.base import RequestId, _Req

__all__ = [
    "ErrorInfo",
    "Response",
    "decode_frame",
    "decode_request",
    "decode_response",
    "encode",
    "encode_ok",
    "error_response",
    "ok_response",
    "parse_result",
    "peek_id",
    "summarise_validation",
]

# ---- responses ------------------------------------------------------------


class ErrorInfo(BaseModel):
    code: str
    message: str


class Response(BaseModel):
    """``{id, ok: true, result}`` or ``{id, ok: false, error: {code, message}}``."""

    model_config = ConfigDict(extra="forbid")
    id: RequestId = None
    ok: bool
    result: JsonValue = None
    error: ErrorInfo | None = None


def ok_response(request_id: RequestId, result: Any = None) -> Response:
    """A success response; pydantic models in ``result`` are dumped by alias."""
    # Not validated again: ``_jsonable`` made it JSON already (the hottest line of a send).
    return Response.model_construct(id=request_id, ok=True, result=_jsonable(result))


def error_response(request_id: RequestId, err: HiveError) -> Response:
    return Response(id=request_id, ok=False, error=ErrorInfo(code=err.code, message=err.message))


def _jsonable(value: Any) -> JsonValue:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value  # type: ignore[no-any-return]


def encode_ok(request_id: RequestId, result: Any = None) -> bytes:
    """``encode(ok_response(request_id, result))``, without the intermediate dict.

    A model result is serialised once, straight into the frame (the reply of
    every send and wait takes this path).
    """
    if not isinstance(result, BaseModel):
        return encode(ok_response(request_id, result))
    body = result.__pydantic_serializer__.to_json(result, by_alias=True)
    # Clients number their requests: an int id needs no JSON encoder.
    rid = b"%d" % request_id if type(request_id) is int else _json_id(request_id)
    return b'{"id":%s,"ok":true,"result":%s,"error":null}\n' % (rid, body)


def _json_id(request_id: RequestId) -> bytes:
    return json.dumps(request_id, ensure_ascii=False).encode()


def encode(model: BaseModel) -> bytes:
    """One JSON line (aliases, no ``None``-noise for request ids)."""
    return (
        model.model_dump_json(by_alias=True, exclude_none=isinstance(model, _Req)).encode() + b"\n"
    )


_T = TypeVar("_T")

_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}
# By identity first: hashing an ``Annotated`` union walks its members (per frame).
_BY_ID: dict[int, tuple[Any, TypeAdapter[Any]]] = {}


def _adapter(union: Any) -> TypeAdapter[Any]:
    hit = _BY_ID.get(id(union))
    if hit is not None and hit[0] is union:
        return hit[1]
    adapter = _ADAPTERS.get(union)
    if adapter is None:
        adapter = _ADAPTERS[union] = TypeAdapter(union)
    _BY_ID[id(union)] = (union, adapter)  # holds ``union``, so its id is never reused
    return adapter


@functools.cache
def _commands(union: Any) -> tuple[str, ...]:
    args = getattr(union, "__origin__", union)
    members = getattr(args, "__args__", ())
    out: list[str] = []
    for member in members:
        field = member.model_fields.get("cmd")
        if field is not None:
            out.extend(getattr(field.annotation, "__args__", ()))
    return tuple(sorted(out))


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _load(line: bytes) -> Any:
    try:
        data = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedFrame(f"frame is not valid UTF-8 JSON: {exc}") from exc
    except RecursionError as exc:
        raise MalformedFrame("frame is nested too deeply") from exc
    if _SURROGATE_ESCAPE.search(line):
        # A lone \ud800-style escape decodes to a string no UTF-8 store or reply can hold.
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise MalformedFrame("frame holds a lone UTF-16 surrogate (\\ud800-\\udfff)") from exc
    return data


def _id_of(data: Any) -> RequestId:
    if isinstance(data, dict):
        rid = data.get("id")
        if isinstance(rid, int | str) and not isinstance(rid, bool):
            return rid
    return None


def peek_id(line: bytes) -> RequestId:
    """The request id of a frame, if one can be read (for error replies)."""
    try:
        return _id_of(_load(line))
    except MalformedFrame:
        return None


def decode_request(union: Any, line: bytes) -> Any:
    """Parse one frame into a member of ``union``.

    Raises ``MalformedFrame`` (not JSON, not an object, fails the schema) or
    ``UnknownCommand`` (a ``cmd`` this socket does not speak), each naming
    the problem so the sender can fix it.
    """
    return decode_frame(union, line)[1]


def decode_frame(union: Any, line: bytes) -> tuple[RequestId, Any]:
    """:func:`decode_request` plus the frame's id, parsing the JSON once.

    On failure the raised error carries ``request_id`` so the reply can echo it.
    """
    if not _SURROGATE_ESCAPE.search(line):
        # The common case in one pass: pydantic parses the JSON itself. Anything it
        # refuses takes the path below, which names the problem.
        try:
            request = _adapter(union).validate_json(line)
        except ValidationError:
            pass
        else:
            rid = getattr(request, "id", None)
            return (rid if not isinstance(rid, bool) else None), request
    data = _load(line)
    rid = _id_of(data)
    try:
        if not isinstance(data, dict):
            raise MalformedFrame("frame must be a JSON object with a 'cmd' field")
        cmd = data.get("cmd")
        known = _commands(union)
        if not isinstance(cmd, str) or cmd not in known:
            raise UnknownCommand(f"unknown cmd {cmd!r} on this socket; known: {', '.join(known)}")
        try:
            return rid, _adapter(union).validate_python(data)
        except ValidationError as exc:
            raise MalformedFrame(f"bad {cmd!r} request: {summarise_validation(exc)}") from exc
    except HiveError as exc:
        exc.request_id = rid
        raise


def summarise_validation(exc: ValidationError, *, tagged: bool = True) -> str:
    """The first few problems of a validation error, one line, named by field.

    ``tagged``: the error came from a discriminated union, whose first ``loc``
    element is the ``cmd`` tag rather than a field.
    """
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"][1 if tagged else 0 :]) or "request"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unexpected field" + (
                " (identity comes from the socket, never the request)"
                if loc in ("from", "sender")
                else ""
            )
        parts.append(f"{loc}: {msg}")
    return "; ".join(parts)


def decode_response(line: bytes) -> Response:
    try:
        return Response.model_validate_json(line)
    except ValidationError as exc:
        raise MalformedFrame(f"malformed response from peer: {summarise_validation(exc)}") from exc


def parse_result(model: type[_T], value: JsonValue) -> _T:
    """Validate a response ``result`` into ``model``."""
    adapter: TypeAdapter[_T] = TypeAdapter(model)
    return adapter.validate_python(value)
