"""Shared pieces of the wire schema: request and result base models, row ids, results."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

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


LooseEndKind = Literal["reminder", "approval", "todo", "question", "schedule"]
