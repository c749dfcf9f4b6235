"""Typed wire models: one schema for every socket and HTTP boundary.

Requests are discriminated unions on ``cmd`` and carry an optional request
``id`` echoed in the ``Response``. Requests forbid unknown fields, so a
``from`` smuggled into an agent's ``send`` is refused rather than ignored:
who is asking is always the socket (or token) a request came in on.

- ``AgentRequest``: an agent's own socket (harness, MCP surfaces, in-sandbox
  producers).
- ``HostRequest``: the operator socket (``hivectl``, dashboard).
- ``LinkRequest`` / ``LinkCommand``: the agent-host link (host → coordinator
  requests; coordinator → host pushed commands).
- ``HelperEvent``: lifecycle notices delivered to the submitting agent.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from hyperhive.config import AgentConfig
from hyperhive.errors import HiveError, MalformedFrame, UnknownCommand

__all__ = [
    "AgentRequest",
    "ErrorInfo",
    "HelperEvent",
    "HostRequest",
    "LinkCommand",
    "LinkRequest",
    "Response",
    "decode_request",
    "encode",
    "error_response",
    "ok_response",
]

RequestId = int | str | None
# Row ids, counters and limits live in SQLite INTEGER (signed 64-bit).
RowId = Annotated[int, Field(ge=0, le=2**63 - 1)]


class _Req(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    id: RequestId = None


class _Out(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


# ---- shared result shapes -------------------------------------------------


class Message(_Out):
    """A broker row as an agent or the operator sees it."""

    id: int
    sender: str = Field(alias="from")
    recipient: str = Field(alias="to")
    body: str
    in_reply_to: RowId | None = None
    created_at: float
    acked: bool = False

    def render(self) -> str:
        """The ``[msg #<id>]`` line the model reads (id 0 = transient, no marker)."""
        reply = f" (re #{self.in_reply_to})" if self.in_reply_to else ""
        head = f"[msg #{self.id}] " if self.id else ""
        return f"{head}from {self.sender}{reply}: {self.body}"


class LooseEnd(_Out):
    kind: Literal["reminder", "approval", "todo", "question", "schedule"]
    id: int
    agent: str
    summary: str
    created_at: float
    due_at: float | None = None
    state: str | None = None
    subsystem: str | None = None
    key: str | None = None


class AgentMeta(_Out):
    name: str
    hyperhive_rev: str
    running: bool
    status_text: str
    status_set_at: float | None
    parent: str | None


class WaitResult(_Out):
    """What woke the harness (empty lists + no flags = the timeout passed)."""

    messages: list[Message] = Field(default_factory=list)
    todo_version: int = 0
    todos_changed: bool = False
    stop: bool = False
    compact: bool = False


# ---- agent socket ---------------------------------------------------------


class SendReq(_Req):
    cmd: Literal["send"]
    to: str
    body: str
    in_reply_to: RowId | None = None


class RecvReq(_Req):
    cmd: Literal["recv"]
    max: int = Field(default=1, ge=1, le=2**31)


class AckUntilReq(_Req):
    cmd: Literal["ack_until"]
    up_to: RowId


class WaitReq(_Req):
    cmd: Literal["wait"]
    timeout: float = Field(default=30.0, ge=0, le=3600)
    todo_version: RowId = 0


class AttachReq(_Req):
    """A new harness incarnation: unacked deliveries of the old one redeliver."""

    cmd: Literal["attach"]


class FenceReq(_Req):
    """Graceful stop begins: ``recv`` answers the graceful-stop message."""

    cmd: Literal["fence"]


class TurnEndReq(_Req):
    cmd: Literal["turn_end"]
    outcome: Literal["ok", "error", "api_error", "needs_login", "interrupted"]
    handled: list[RowId] = Field(default_factory=list, max_length=10_000)
    context_usage: float | None = Field(default=None, ge=0)
    session_id: str | None = None
    cost_usd: float | None = None


class RemindReq(_Req):
    cmd: Literal["remind"]
    message: str
    delay_seconds: float | None = Field(default=None, ge=0)
    at_unix_timestamp: float | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _exactly_one(self) -> RemindReq:
        if (self.delay_seconds is None) == (self.at_unix_timestamp is None):
            raise ValueError("give exactly one of delay_seconds or at_unix_timestamp")
        return self


class GetLooseEndsReq(_Req):
    cmd: Literal["get_loose_ends"]
    agent: str | None = None


LooseEndKind = Literal["reminder", "approval", "todo", "question", "schedule"]


class CancelLooseEndReq(_Req):
    cmd: Literal["cancel_loose_end"]
    kind: LooseEndKind
    row_id: RowId


class TodoUpsertReq(_Req):
    cmd: Literal["todo_upsert"]
    subsystem: str = Field(min_length=1, max_length=64)
    key: str = Field(min_length=1, max_length=128)
    body: str


class TodoClearReq(_Req):
    cmd: Literal["todo_clear"]
    subsystem: str = Field(min_length=1, max_length=64)
    key: str = Field(min_length=1, max_length=128)


class SetStatusReq(_Req):
    cmd: Literal["set_status"]
    text: str


class GetAgentMetaReq(_Req):
    cmd: Literal["get_agent_meta"]
    name: str | None = None


class WakeReq(_Req):
    """From an in-sandbox producer: lands as a message from ``from`` and wakes."""

    cmd: Literal["wake"]
    sender: str = Field(alias="from")
    body: str


class CompactReq(_Req):
    cmd: Literal["compact"]


class AskOperatorReq(_Req):
    cmd: Literal["ask_operator"]
    question: str


class SchedulePromptReq(_Req):
    cmd: Literal["schedule_prompt"]
    target: str
    prompt: str
    every_seconds: float | None = Field(default=None, ge=60)
    cron: str | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> SchedulePromptReq:
        if (self.every_seconds is None) == (self.cron is None):
            raise ValueError("give exactly one of every_seconds (at least 60) or cron")
        return self


class ListSchedulesReq(_Req):
    cmd: Literal["list_schedules"]


class CancelScheduleReq(_Req):
    cmd: Literal["cancel_schedule"]
    schedule_id: RowId


class RequestInitConfigReq(_Req):
    """Spawn (or re-init) a direct child: ``config`` is the child's agent.toml text."""

    cmd: Literal["request_init_config"]
    name: str
    config: str = ""


class RequestApplyCommitReq(_Req):
    """Apply a commit of ``agent``'s proposed config repo (own or a descendant's)."""

    cmd: Literal["request_apply_commit"]
    agent: str
    commit: str = Field(default="HEAD", min_length=1, max_length=64)


class LifecycleReq(_Req):
    """``kill``/``start``/``restart``/``update``/``destroy`` of a descendant."""

    cmd: Literal["kill", "start", "restart", "update", "destroy"]
    agent: str


class GetLogsReq(_Req):
    cmd: Literal["get_logs"]
    agent: str
    lines: int = Field(default=100, ge=1, le=5000)


class GetHostJournalReq(_Req):
    cmd: Literal["get_host_journal"]
    lines: int = Field(default=100, ge=1, le=5000)


class RequestUpdateMetaInputsReq(_Req):
    """Ask the operator to move the hive to another pinned claude CLI version."""

    cmd: Literal["request_update_meta_inputs"]
    claude_version: str = Field(pattern=r"^\d+\.\d+\.\d+$")
    reason: str = ""


AgentRequest = Annotated[
    SendReq
    | RecvReq
    | AckUntilReq
    | WaitReq
    | AttachReq
    | FenceReq
    | TurnEndReq
    | RemindReq
    | GetLooseEndsReq
    | CancelLooseEndReq
    | TodoUpsertReq
    | TodoClearReq
    | SetStatusReq
    | GetAgentMetaReq
    | WakeReq
    | CompactReq
    | AskOperatorReq
    | SchedulePromptReq
    | ListSchedulesReq
    | CancelScheduleReq
    | RequestInitConfigReq
    | RequestApplyCommitReq
    | LifecycleReq
    | GetLogsReq
    | GetHostJournalReq
    | RequestUpdateMetaInputsReq,
    Field(discriminator="cmd"),
]

# ---- operator socket ------------------------------------------------------


class OpSendReq(_Req):
    cmd: Literal["send"]
    to: str
    body: str
    in_reply_to: RowId | None = None


class OpInboxReq(_Req):
    cmd: Literal["inbox"]
    limit: int = Field(default=50, ge=1, le=1000)
    unread_only: bool = False


class OpOutboxReq(_Req):
    """Messages the operator sent (newest ``limit``, oldest first)."""

    cmd: Literal["outbox"]
    limit: int = Field(default=50, ge=1, le=1000)


class OpAckReq(_Req):
    cmd: Literal["ack_until"]
    up_to: RowId


class OpAgentsReq(_Req):
    cmd: Literal["agents"]


class OpSetParentReq(_Req):
    cmd: Literal["set_parent"]
    child: str
    new_parent: str | None = None


class OpTopologyReq(_Req):
    cmd: Literal["topology"]


class OpLooseEndsReq(_Req):
    cmd: Literal["get_loose_ends"]
    agent: str = "*"


class OpCancelLooseEndReq(_Req):
    cmd: Literal["cancel_loose_end"]
    kind: LooseEndKind
    row_id: RowId


class OpQuestionsReq(_Req):
    cmd: Literal["questions"]
    open_only: bool = True


class OpAnswerReq(_Req):
    cmd: Literal["answer_question"]
    question_id: RowId
    answer: str


class OpSpawnReq(_Req):
    cmd: Literal["spawn"]
    name: str
    config: AgentConfig = Field(default_factory=AgentConfig)
    parent: str | None = None


class OpStatusReq(_Req):
    cmd: Literal["status"]


class OpMessagesReq(_Req):
    """An agent's inbox and outbox, for the operator."""

    cmd: Literal["messages"]
    agent: str
    limit: int = Field(default=50, ge=1, le=1000)


class OpApprovalsReq(_Req):
    cmd: Literal["approvals"]
    pending_only: bool = True


class OpApprovalShowReq(_Req):
    cmd: Literal["approval_show"]
    approval_id: RowId


class OpResolveReq(_Req):
    cmd: Literal["approve", "deny"]
    approval_id: RowId
    reason: str = ""


class OpLifecycleReq(_Req):
    """The operator's kill/start/restart/update/destroy of any agent."""

    cmd: Literal["agent_kill", "agent_start", "agent_restart", "agent_update", "agent_destroy"]
    agent: str


class OpLogsReq(_Req):
    cmd: Literal["logs"]
    agent: str
    lines: int = Field(default=100, ge=1, le=5000)


class OpCompactReq(_Req):
    cmd: Literal["compact"]
    agent: str


class OpPermsSetReq(_Req):
    """Propose new tool groups/capabilities for an agent (an approval to apply)."""

    cmd: Literal["perms_set"]
    agent: str
    tool_groups: list[str]
    capabilities: list[str] = Field(default_factory=list)


class OpConfigReq(_Req):
    cmd: Literal["agent_config"]
    agent: str


HostRequest = Annotated[
    OpSendReq
    | OpInboxReq
    | OpOutboxReq
    | OpAckReq
    | OpAgentsReq
    | OpSetParentReq
    | OpTopologyReq
    | OpLooseEndsReq
    | OpCancelLooseEndReq
    | OpQuestionsReq
    | OpAnswerReq
    | OpSpawnReq
    | OpStatusReq
    | OpMessagesReq
    | OpApprovalsReq
    | OpApprovalShowReq
    | OpResolveReq
    | OpLifecycleReq
    | OpLogsReq
    | OpCompactReq
    | OpPermsSetReq
    | OpConfigReq,
    Field(discriminator="cmd"),
]

# ---- agent-host link ------------------------------------------------------


class LinkRegisterReq(_Req):
    cmd: Literal["register"]
    host_id: str = Field(min_length=1, max_length=64)
    pid: int | None = None


class LinkAgentStateReq(_Req):
    """The host reports an agent's turn state (Idle/Thinking/Compacting)."""

    cmd: Literal["agent_state"]
    agent: str
    turn_state: Literal["idle", "thinking", "compacting", "stopped"]
    since: float
    needs_login: bool = False


class LinkAgentCrashedReq(_Req):
    cmd: Literal["agent_crashed"]
    agent: str
    reason: str


class LinkGoodbyeReq(_Req):
    """The host is stopping on purpose: its agents stopping is not a crash."""

    cmd: Literal["goodbye"]


LinkRequest = Annotated[
    LinkRegisterReq | LinkAgentStateReq | LinkAgentCrashedReq | LinkGoodbyeReq,
    Field(discriminator="cmd"),
]


class ActivateCmd(_Req):
    cmd: Literal["activate"]
    agent: str
    config: AgentConfig
    parent: str | None = None
    descendants: list[str] = Field(default_factory=list)
    incarnation: int = 0


class DeactivateCmd(_Req):
    cmd: Literal["deactivate"]
    agent: str
    graceful: bool = True


LinkCommand = Annotated[ActivateCmd | DeactivateCmd, Field(discriminator="cmd")]

# ---- helper events --------------------------------------------------------


class _Event(_Out):
    agent: str


class ContainerCrash(_Event):
    event: Literal["container_crash"] = "container_crash"
    reason: str = ""


class NeedsUpdate(_Event):
    event: Literal["needs_update"] = "needs_update"


class ApprovalResolved(_Event):
    event: Literal["approval_resolved"] = "approval_resolved"
    approval_id: int
    approved: bool
    reason: str = ""


class Spawned(_Event):
    event: Literal["spawned"] = "spawned"


class Rebuilt(_Event):
    event: Literal["rebuilt"] = "rebuilt"


class Killed(_Event):
    event: Literal["killed"] = "killed"


class Destroyed(_Event):
    event: Literal["destroyed"] = "destroyed"


class NeedsLogin(_Event):
    event: Literal["needs_login"] = "needs_login"


class LoggedIn(_Event):
    event: Literal["logged_in"] = "logged_in"


class ConfigReady(_Event):
    event: Literal["config_ready"] = "config_ready"


HelperEvent = Annotated[
    ContainerCrash
    | NeedsUpdate
    | ApprovalResolved
    | Spawned
    | Rebuilt
    | Killed
    | Destroyed
    | NeedsLogin
    | LoggedIn
    | ConfigReady,
    Field(discriminator="event"),
]

# Inbox-worthy events go to the submitter's inbox; the rest become todos.
INBOX_EVENTS = frozenset({"container_crash", "needs_update", "approval_resolved"})

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
    return Response(id=request_id, ok=True, result=_jsonable(result))


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


def encode(model: BaseModel) -> bytes:
    """One JSON line (aliases, no ``None``-noise for request ids)."""
    return (
        model.model_dump_json(by_alias=True, exclude_none=isinstance(model, _Req)).encode() + b"\n"
    )


_T = TypeVar("_T")

_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _adapter(union: Any) -> TypeAdapter[Any]:
    if union not in _ADAPTERS:
        _ADAPTERS[union] = TypeAdapter(union)
    return _ADAPTERS[union]


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
            raise MalformedFrame(f"bad {cmd!r} request: {_summarise(exc)}") from exc
    except HiveError as exc:
        exc.request_id = rid
        raise


def _summarise(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"][1:]) or "request"
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
        raise MalformedFrame(f"malformed response from peer: {_summarise(exc)}") from exc


def parse_result(model: type[_T], value: JsonValue) -> _T:
    """Validate a response ``result`` into ``model``."""
    adapter: TypeAdapter[_T] = TypeAdapter(model)
    return adapter.validate_python(value)
