"""Shared pieces of the wire schema: request and result base models, row ids, results.

Outside the ``protocol`` package on purpose: the tool declarations
(:mod:`hyperhive.tools`) build their coordinator requests on these, and the
protocol's socket unions are built from the declarations, so the
declarations must not import the package that aggregates those unions.
``hyperhive.protocol.base`` re-exports all of it.

Every request class names its response type: ``class SendReq(Req[Sent])``.
The client validates a ``result`` into it (``RpcClient.call(req: Req[R]) -> R``),
and a dispatch table checks at import that each handler returns it.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
)

RequestId = int | str | None
# Row ids, counters and limits live in SQLite INTEGER (signed 64-bit).
RowId = Annotated[int, Field(ge=0, le=2**63 - 1)]


R = TypeVar("R")


# W3C trace context (version-traceid-parentid-flags), lower-case hex.
TRACEPARENT_PATTERN = r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"


class _Req(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)
    id: RequestId = None
    # The caller's span, when it traces: the server parents its own span on it and
    # trusts it for nothing else (identity is the socket's). Absent when untraced.
    traceparent: Annotated[str, Field(pattern=TRACEPARENT_PATTERN)] | None = None


class Req(_Req, Generic[R]):
    """A request whose answer is an ``R`` (a result model, a list of them, or None)."""


def result_type(req_type: type[BaseModel]) -> Any:
    """The ``R`` a request class was declared with (``SendReq`` → ``Sent``), also through a
    generic subclass of :class:`Req` (``class LogTailAsk(Ask[HostTail])`` → ``HostTail``)."""
    for klass in req_type.__mro__:
        meta = getattr(klass, "__pydantic_generic_metadata__", None)
        origin = meta.get("origin") if meta else None
        if isinstance(origin, type) and issubclass(origin, Req) and meta and meta.get("args"):
            return meta["args"][0]
    raise TypeError(f"{req_type.__name__} does not declare its response type (Req[...])")


@functools.cache
def result_adapter(req_type: type[BaseModel]) -> TypeAdapter[Any]:
    """A cached validator for the results of ``req_type``."""
    return TypeAdapter(result_type(req_type))


class _Out(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, defer_build=True)


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
    # The whole text (a todo's Read(<path>) pointer, a question's last line): the
    # model acts on it, so nothing is cut.
    body: str
    created_at: float
    due_at: float | None = None
    state: str | None = None
    subsystem: str | None = None
    key: str | None = None


class MatrixAccount(_Out):
    """A Matrix identity an agent can act as (spec 002's ``matrix_accounts`` entry)."""

    name: str
    user_id: str | None = None
    homeserver: str


class MatrixAccountView(_Out):
    """An agent's Matrix account as the operator sees it (its host's view)."""

    user_id: str
    homeserver: str
    pending_invites: list[str] = Field(default_factory=list)
    problem: str | None = None


class AgentMeta(_Out):
    name: str
    hive_name: str  # hive.toml's name, else the hive's generated id
    hyperhive_rev: str
    running: bool
    status_text: str
    status_set_at: float | None
    parent: str | None
    # Omitted (None) for an agent with no Matrix provisioning.
    matrix_accounts: list[MatrixAccount] | None = None


class Sent(_Out):
    """A stored message: its id and who it went to (``<parent>`` resolved)."""

    id: int
    to: str


class Created(_Out):
    """The id of a row a request created (a todo, a schedule, a woken message)."""

    id: int


class Acked(_Out):
    acked: int


class Cancelled(_Out):
    cancelled: bool


class CompactQueued(_Out):
    queued: bool
    context_usage: float | None  # None: no turn recorded yet (the operator's compact)
    note: str


class LogTail(_Out):
    agent: str
    lines: list[str]
    # Where a follower goes on from (``logs -f``), and the agent host the log is on.
    cursor: str | None = None
    host: str | None = None


class ApprovalRequested(_Out):
    """An approval row now waits for the operator."""

    approval_id: int
    state: str
    commit: str | None = None
    note: str | None = None


class AgentStopped(_Out):
    agent: str
    stopped: bool


class AgentRunning(_Out):
    agent: str
    running: bool


class AgentDestroyed(_Out):
    agent: str
    destroyed: bool
    data_moved_to: str | None  # on the disk of the agent host that held it
    # Its host was not connected: its directories move to trash when it is back.
    trash_waits_for: str | None = None


LifecycleResult = AgentStopped | AgentRunning | AgentDestroyed


class WaitResult(_Out):
    """What woke the harness (empty lists + no flags = the timeout passed)."""

    messages: list[Message] = Field(default_factory=list)
    todo_version: int = 0
    todos_changed: bool = False
    stop: bool = False
    compact: bool = False


LooseEndKind = Literal["reminder", "approval", "todo", "question", "schedule"]
# An agent's harness, as its host reports it (``waiting_slot``: queued for a claude slot).
TurnStateName = Literal["idle", "waiting_slot", "thinking", "compacting", "stopped"]


__all__ = [
    "Acked",
    "AgentDestroyed",
    "AgentMeta",
    "AgentRunning",
    "AgentStopped",
    "ApprovalRequested",
    "Cancelled",
    "CompactQueued",
    "Created",
    "LifecycleResult",
    "LogTail",
    "LooseEnd",
    "LooseEndKind",
    "MatrixAccount",
    "MatrixAccountView",
    "Message",
    "Req",
    "RequestId",
    "RowId",
    "Sent",
    "TRACEPARENT_PATTERN",
    "TurnStateName",
    "WaitResult",
    "result_adapter",
    "result_type",
]
