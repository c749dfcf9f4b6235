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
backoff unless ``CLAUDE_CODE_MAX_RETRIES`` says otherwise). What a finished
run's events come to is :mod:`~hyperhive.agent.turnreport`'s.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from hyperhive.runcost import Figures

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
    "UnknownEvent",
    "Usage",
    "UserEvent",
    "UserMessage",
    "parse_event",
    "parse_line",
]


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

    @property
    def replayed(self) -> bool:
        """An echo of a user line sent on stdin (``--replay-user-messages``): claude took it in."""
        return bool((self.model_extra or {}).get("isReplay"))

    @property
    def text(self) -> str:
        """The message's text (a replayed line is one string)."""
        if isinstance(self.message.content, str):
            return self.message.content
        return "".join(b.text for b in self.message.content if isinstance(b, TextBlock))


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
