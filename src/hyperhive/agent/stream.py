"""claude's ``--output-format stream-json --verbose`` output, as typed events.

Pure module: no I/O. One JSON object per stdout line; :func:`parse_line`
turns each into a model and never raises — an event type, subtype or shape
this code does not know becomes an :class:`UnknownEvent` carrying the raw
object, so a new claude release degrades the display, not the turn.

What claude 2.1.328 emits (measured): ``system/init`` (session id, tools,
MCP server status; first, except that ``/compact``'s ``status`` events come
before it), then ``assistant`` events — one per content block,
so a text and a tool call of one message arrive as two events with the same
message id — and ``user`` events carrying ``tool_result`` blocks, other
``system`` events (``api_retry``, ``status`` around ``/compact``,
``compact_boundary``), and a final ``result``.

An API failure is not a crash: claude exits 1 after a synthetic assistant
message (model ``<synthetic>``, ``error`` set, e.g. ``authentication_failed``
for a 401 or 403) and a ``result`` with ``is_error: true``,
``api_error_status`` / ``api_error_type`` and ``terminal_reason:
"api_error"`` — while its ``subtype`` still says ``success``. Before giving
up it retries, a 401 included (``system/api_retry`` events; 10 retries with
backoff unless ``CLAUDE_CODE_MAX_RETRIES`` says otherwise).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from hyperhive.runcost import UNKNOWN_MODEL, Figures

__all__ = [
    "ApiRetryEvent",
    "AssistantEvent",
    "AssistantMessage",
    "ContentBlock",
    "InitEvent",
    "McpServerStatus",
    "ModelUsage",
    "OtherBlock",
    "ResultEvent",
    "StreamEvent",
    "SystemEvent",
    "TextBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "TurnOutcome",
    "TurnReport",
    "UnknownEvent",
    "Usage",
    "UserEvent",
    "UserMessage",
    "classify_outcome",
    "context_tokens",
    "context_usage",
    "parse_event",
    "parse_line",
    "session_totals",
    "summarize_turn",
]

TurnOutcome = Literal["ok", "error", "api_error", "needs_login", "interrupted"]

# What claude's own error label says when the API refused the credentials.
_AUTH_FAILED = "authentication_failed"
# A wrapper (sandbox, shell) reports a child killed by a signal as 128+N.
_SIGNAL_EXITS = frozenset(128 + s for s in (signal.SIGINT, signal.SIGKILL, signal.SIGTERM))


class _Event(BaseModel):
    # Unknown fields are kept: the bus shows them, and claude adds fields often.
    model_config = ConfigDict(extra="allow")


class Usage(BaseModel):
    """Token usage, as the API and claude's ``result`` report it."""

    model_config = ConfigDict(extra="allow")

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0


class ModelUsage(BaseModel):
    """One model's entry in ``result.modelUsage``: the *session's* totals so far.

    claude restores them on ``--resume``, so they grow over a session's runs
    (see :mod:`hyperhive.runcost`).
    """

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    input_tokens: int = Field(0, alias="inputTokens", ge=0)
    output_tokens: int = Field(0, alias="outputTokens", ge=0)
    cache_read_input_tokens: int = Field(0, alias="cacheReadInputTokens", ge=0)
    cache_creation_input_tokens: int = Field(0, alias="cacheCreationInputTokens", ge=0)
    cost_usd: float = Field(0.0, alias="costUSD", ge=0)
    context_window: int | None = Field(None, alias="contextWindow")

    def figures(self) -> Figures:
        return Figures(
            self.cost_usd,
            self.input_tokens,
            self.output_tokens,
            self.cache_read_input_tokens,
            self.cache_creation_input_tokens,
        )


class TextBlock(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["text"] = "text"
    text: str


class ToolUseBlock(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class ToolResultBlock(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str | list[dict[str, Any]] = ""
    is_error: bool = False

    @property
    def text(self) -> str:
        """The result's text, whether it came as a string or as text blocks."""
        if isinstance(self.content, str):
            return self.content
        return "".join(str(b.get("text", "")) for b in self.content if b.get("type") == "text")


class OtherBlock(BaseModel):
    """A block type not modelled here (thinking, images, server tools…)."""

    model_config = ConfigDict(extra="allow")

    type: str


_BLOCKS: dict[str, type[BaseModel]] = {
    "text": TextBlock,
    "tool_use": ToolUseBlock,
    "tool_result": ToolResultBlock,
}


def _as_block(value: Any) -> Any:
    if isinstance(value, dict):
        model = _BLOCKS.get(str(value.get("type")), OtherBlock)
        try:
            return model.model_validate(value)
        except ValidationError:
            return OtherBlock.model_validate(value)
    return value


ContentBlock = Annotated[
    TextBlock | ToolUseBlock | ToolResultBlock | OtherBlock, BeforeValidator(_as_block)
]


class McpServerStatus(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str
    status: str


class InitEvent(_Event):
    """``system/init``: the session's id, tools and MCP servers as claude resolved them."""

    type: Literal["system"] = "system"
    subtype: Literal["init"] = "init"
    session_id: str
    tools: list[str] = Field(default_factory=list)
    mcp_servers: list[McpServerStatus] = Field(default_factory=list)
    model: str | None = None
    cwd: str | None = None


class ApiRetryEvent(_Event):
    """``system/api_retry``: claude is retrying a failed API call."""

    type: Literal["system"] = "system"
    subtype: Literal["api_retry"] = "api_retry"
    session_id: str | None = None
    attempt: int = 0
    max_retries: int = 0
    retry_delay_ms: int = 0
    error_status: int | None = None
    error: str | None = None


class SystemEvent(_Event):
    """Any other ``system`` event (``status``, ``compact_boundary``, …)."""

    type: Literal["system"] = "system"
    subtype: str = ""
    session_id: str | None = None


class AssistantMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = ""
    model: str = ""
    content: list[ContentBlock] = Field(default_factory=list)
    usage: Usage | None = None


class AssistantEvent(_Event):
    """A model message, or claude's synthetic one reporting an API error."""

    type: Literal["assistant"] = "assistant"
    message: AssistantMessage
    session_id: str | None = None
    parent_tool_use_id: str | None = None
    error: str | None = None
    is_api_error_message: bool = False
    api_error_status: int | None = None

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.message.content if isinstance(b, TextBlock))

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.message.content if isinstance(b, ToolUseBlock)]

    @property
    def synthetic(self) -> bool:
        """Made up by claude (an error notice), not returned by the model."""
        return self.is_api_error_message or self.message.model == "<synthetic>"


class UserMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str = "user"
    content: str | list[ContentBlock] = ""


class UserEvent(_Event):
    """A user turn claude sends on: tool results, or a replayed prompt."""

    type: Literal["user"] = "user"
    message: UserMessage
    session_id: str | None = None
    parent_tool_use_id: str | None = None

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        if isinstance(self.message.content, str):
            return []
        return [b for b in self.message.content if isinstance(b, ToolResultBlock)]


class ResultEvent(_Event):
    """The run's last event: outcome, usage, and the session's cost so far.

    ``total_cost_usd`` and ``modelUsage`` are the whole session's totals, not
    the run's (claude restores them on ``--resume``); ``usage`` is the run's
    own summary, but it reports no tokens for ``/compact``.
    """

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    type: Literal["result"] = "result"
    subtype: str = "success"
    is_error: bool = False
    session_id: str | None = None
    result: str | None = None
    usage: Usage = Field(default_factory=Usage)
    total_cost_usd: float = 0.0
    num_turns: int = 0
    duration_ms: int = 0
    stop_reason: str | None = None
    terminal_reason: str | None = None
    api_error_status: int | None = None
    api_error_type: str | None = None
    model_usage: dict[str, ModelUsage] = Field(default_factory=dict, alias="modelUsage")


class UnknownEvent(BaseModel):
    """A line this module does not understand, kept whole."""

    type: str
    raw: dict[str, Any] = Field(default_factory=dict)


StreamEvent = (
    InitEvent
    | ApiRetryEvent
    | SystemEvent
    | AssistantEvent
    | UserEvent
    | ResultEvent
    | UnknownEvent
)

_BY_SUBTYPE: dict[tuple[str, str], type[_Event]] = {
    ("system", "init"): InitEvent,
    ("system", "api_retry"): ApiRetryEvent,
}
_BY_TYPE: dict[str, type[_Event]] = {
    "system": SystemEvent,
    "assistant": AssistantEvent,
    "user": UserEvent,
    "result": ResultEvent,
}


def parse_event(data: dict[str, Any]) -> StreamEvent:
    """Type one decoded stream object; unknown or malformed → :class:`UnknownEvent`."""
    kind = str(data.get("type", ""))
    model = _BY_SUBTYPE.get((kind, str(data.get("subtype", "")))) or _BY_TYPE.get(kind)
    if model is None:
        return UnknownEvent(type=kind, raw=data)
    try:
        event = model.model_validate(data)
    except ValidationError:
        return UnknownEvent(type=kind, raw=data)
    assert isinstance(
        event, InitEvent | ApiRetryEvent | SystemEvent | AssistantEvent | UserEvent | ResultEvent
    )
    return event


def parse_line(line: str | bytes) -> StreamEvent | None:
    """One stdout line → an event; ``None`` for a blank line. Never raises."""
    text = line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line
    text = text.strip()
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return UnknownEvent(type="invalid", raw={"line": text})
    if not isinstance(data, dict):
        return UnknownEvent(type="invalid", raw={"line": text})
    return parse_event(data)


def _result(events: Iterable[StreamEvent]) -> ResultEvent | None:
    found = None
    for event in events:
        if isinstance(event, ResultEvent):
            found = event
    return found


def session_totals(result: ResultEvent | None) -> dict[str, Figures]:
    """The session's totals per model after the run (empty: the run reported none).

    A result without ``modelUsage`` but with a cost (not seen from 2.1.328)
    is kept as a USD-only total (:data:`~hyperhive.runcost.UNKNOWN_MODEL`).
    """
    if result is None:
        return {}
    if result.model_usage:
        return {model: usage.figures() for model, usage in result.model_usage.items()}
    if result.total_cost_usd > 0:
        return {UNKNOWN_MODEL: Figures(result.total_cost_usd)}
    return {}


def classify_outcome(events: Sequence[StreamEvent], returncode: int | None) -> TurnOutcome:
    """How a finished turn ended.

    A ``result`` event decides it (a signal that arrives after it does not
    undo a finished turn): an authentication failure → ``needs_login``; an
    API error → ``api_error``; ``is_error`` or a non-success subtype →
    ``error``; else ``ok``. Without one, death by signal (negative
    ``returncode``, or 128+INT/KILL/TERM from a wrapper) → ``interrupted``,
    anything else → ``error`` (or ``needs_login`` if claude got as far as
    saying so).
    """
    auth_failed = any(isinstance(e, AssistantEvent) and e.error == _AUTH_FAILED for e in events)
    result = _result(events)
    if result is None:
        if returncode is not None and (returncode < 0 or returncode in _SIGNAL_EXITS):
            return "interrupted"
        return "needs_login" if auth_failed else "error"
    if result.is_error:
        if (
            auth_failed
            or result.api_error_status == 401
            or result.api_error_type == "authentication_error"
        ):
            return "needs_login"
        if result.api_error_status is not None or result.terminal_reason == "api_error":
            return "api_error"
        return "error"
    if result.subtype != "success":
        return "error"
    return "ok"


def context_tokens(usage: Usage) -> int:
    """Tokens of the prompt a call sent: fresh input plus cache reads and writes."""
    return usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens


def context_usage(usage: Usage, context_window: int) -> float:
    """The fraction of ``context_window`` the prompt of ``usage`` filled."""
    if context_window <= 0:
        raise ValueError(f"context window must be positive, got {context_window}")
    return context_tokens(usage) / context_window


@dataclass(frozen=True, slots=True)
class TurnReport:
    """What the harness records about one finished run of claude.

    ``context_usage`` is measured on the turn's *last model call* (its prompt
    is the conversation as it now stands): ``result.usage`` sums every call
    of the turn, so a turn of five tool calls would read about five times
    too full. It falls back to ``result.usage`` when no model call reported.

    ``session_totals`` is what the session had cost after the run, per model,
    as claude reported it: not the run's cost. The coordinator turns it into
    the run's own (:mod:`hyperhive.runcost`), against the session's previous totals.
    """

    outcome: TurnOutcome
    session_id: str | None
    usage: Usage
    session_totals: dict[str, Figures]
    num_turns: int
    result_text: str | None
    context_tokens: int
    context_window: int
    context_usage: float
    model_context_window: int | None
    model: str | None = None  # the model the session was started with (``system/init``)


def summarize_turn(
    events: Sequence[StreamEvent], returncode: int | None, context_window: int
) -> TurnReport:
    """Outcome, session, usage and context fill of a finished turn.

    ``context_window`` is the caller's figure (``HiveConfig.context_window``):
    the watermark is the operator's budget. The window claude reports for the
    model is kept beside it as ``model_context_window``.
    """
    result = _result(events)
    session_id = result.session_id if result is not None else None
    last_call: Usage | None = None
    model: str | None = None
    for event in events:
        if isinstance(event, InitEvent):
            session_id = session_id or event.session_id
            model = model or event.model
        if isinstance(event, AssistantEvent) and not event.synthetic and event.message.usage:
            last_call = event.message.usage
    usage = result.usage if result is not None else Usage()
    windows = [m.context_window for m in (result.model_usage if result else {}).values()]
    tokens = context_tokens(last_call or usage)
    return TurnReport(
        outcome=classify_outcome(events, returncode),
        session_id=session_id,
        usage=usage,
        session_totals=session_totals(result),
        num_turns=result.num_turns if result is not None else 0,
        result_text=result.result if result is not None else None,
        context_tokens=tokens,
        context_window=context_window,
        context_usage=context_usage(Usage(input_tokens=tokens), context_window),
        model_context_window=max((w for w in windows if w), default=None),
        model=model,
    )
