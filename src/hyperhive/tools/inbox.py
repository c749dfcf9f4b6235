"""``inbox``: get_loose_ends, cancel_loose_end, remind (``hyperhive`` surface)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from hyperhive.tools.decl import HYPERHIVE_SERVER, Tool, ToolArgs, as_json
from hyperhive.tools.groups import ToolGroup
from hyperhive.wirebase import Cancelled, LooseEnd, LooseEndKind, Req, RowId, _Out

__all__ = [
    "REMIND_MAX_BYTES",
    "TOOLS",
    "CancelArgs",
    "CancelLooseEndReq",
    "GetLooseEndsReq",
    "LooseEndsArgs",
    "RemindArgs",
    "RemindReq",
    "Reminded",
]

# A reminder is a note to self, stored until it fires and then delivered whole as a
# message: held to a stated size so an agent cannot park megabytes.
REMIND_MAX_BYTES = 64 * 1024


class LooseEndsArgs(ToolArgs):
    agent: str | None = Field(
        default=None, description="A descendant's instead (others: query_agent_state)."
    )


class GetLooseEndsReq(LooseEndsArgs, Req[list[LooseEnd]]):
    cmd: Literal["get_loose_ends"]


class CancelArgs(ToolArgs):
    kind: Literal["reminder", "approval", "todo", "question", "schedule"]
    id: int = Field(ge=0, description="Its row id (not a task id).")


class CancelLooseEndReq(Req[Cancelled]):
    cmd: Literal["cancel_loose_end"]
    kind: LooseEndKind
    row_id: RowId


class RemindArgs(ToolArgs):
    message: str = Field(
        description=f"At most {REMIND_MAX_BYTES // 1024} KiB (more: write a file, name it)."
    )
    delay_seconds: float | None = Field(default=None, ge=0, description="Fire in N seconds.")
    at_unix_timestamp: float | None = Field(default=None, ge=0, description="Or at this time.")

    @model_validator(mode="after")
    def _exactly_one(self) -> RemindArgs:
        if (self.delay_seconds is None) == (self.at_unix_timestamp is None):
            raise ValueError("give exactly one of delay_seconds or at_unix_timestamp")
        return self


class Reminded(_Out):
    id: int
    due_at: float


class RemindReq(RemindArgs, Req[Reminded]):
    cmd: Literal["remind"]


_I = ToolGroup.INBOX

TOOLS: tuple[Tool[Any, Any], ...] = (
    Tool(
        HYPERHIVE_SERVER,
        "get_loose_ends",
        "What is open for you: todos (results that arrived), reminders, approvals, "
        "questions, schedules.",
        LooseEndsArgs,
        "the rows as a JSON list; or: no loose ends",
        _I,
        wire=GetLooseEndsReq,
        render=lambda a, rows: as_json(rows) if rows else "no loose ends",
    ),
    Tool(
        HYPERHIVE_SERVER,
        "cancel_loose_end",
        "Close a row of get_loose_ends (a todo once you handled it).",
        CancelArgs,
        "<kind> #id cancelled; or: was already closed",
        _I,
        wire=CancelLooseEndReq,
        to_wire=lambda a: {"kind": a.kind, "row_id": a.id},
        render=lambda a, r: (
            f"{a.kind} #{a.id} " + ("cancelled" if r.cancelled else "was already closed")
        ),
    ),
    Tool(
        HYPERHIVE_SERVER,
        "remind",
        "A message to yourself later (end the turn meanwhile): delay_seconds or at_unix_timestamp.",
        RemindArgs,
        "reminder #id set for unix time T",
        _I,
        wire=RemindReq,
        render=lambda a, r: f"reminder #{r.id} set for unix time {r.due_at:.0f}",
    ),
)
