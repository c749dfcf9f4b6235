"""``scheduling``: schedule_prompt, list_schedules, cancel_schedule (``hyperhive`` surface)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from hyperhive.tools.decl import HYPERHIVE_SERVER, NoArgs, Tool, ToolArgs, as_json
from hyperhive.tools.groups import ToolGroup
from hyperhive.wirebase import Cancelled, Created, Req, RowId, _Out

__all__ = [
    "TOOLS",
    "CancelScheduleReq",
    "ListSchedulesReq",
    "Schedule",
    "ScheduleArgs",
    "ScheduleIdArgs",
    "SchedulePromptReq",
]


class ScheduleArgs(ToolArgs):
    target: str = Field(description="Yourself or one of your descendants.")
    prompt: str = Field(description="The message it gets at each firing (from `reminder`).")
    every_seconds: float | None = Field(default=None, ge=60, description="An interval, ≥ 60.")
    cron: str | None = Field(default=None, description="Or a 5-field cron expression (UTC).")

    @model_validator(mode="after")
    def _exactly_one(self) -> ScheduleArgs:
        if (self.every_seconds is None) == (self.cron is None):
            raise ValueError("give exactly one of every_seconds (at least 60) or cron")
        return self


class SchedulePromptReq(ScheduleArgs, Req[Created]):
    cmd: Literal["schedule_prompt"]


class Schedule(_Out):
    id: int
    owner: str
    target: str
    prompt: str
    every_seconds: float | None
    cron: str | None
    next_at: float
    created_at: float


class ListSchedulesReq(NoArgs, Req[list[Schedule]]):
    cmd: Literal["list_schedules"]


class ScheduleIdArgs(ToolArgs):
    id: int = Field(ge=0, description="The schedule's id from list_schedules.")


class CancelScheduleReq(Req[Cancelled]):
    cmd: Literal["cancel_schedule"]
    schedule_id: RowId


_S = ToolGroup.SCHEDULING

TOOLS: tuple[Tool[Any, Any], ...] = (
    Tool(
        HYPERHIVE_SERVER,
        "schedule_prompt",
        "Send yourself or a descendant a prompt on a schedule: exactly one of "
        "every_seconds or cron.",
        ScheduleArgs,
        "schedule #id created for <target>",
        _S,
        wire=SchedulePromptReq,
        render=lambda a, r: f"schedule #{r.id} created for {a.target}",
    ),
    Tool(
        HYPERHIVE_SERVER,
        "list_schedules",
        "Your and your descendants' schedules.",
        NoArgs,
        "the schedules as a JSON list; or: no schedules",
        _S,
        wire=ListSchedulesReq,
        render=lambda a, rows: as_json(rows) if rows else "no schedules",
    ),
    Tool(
        HYPERHIVE_SERVER,
        "cancel_schedule",
        "Stop a schedule.",
        ScheduleIdArgs,
        "schedule #id cancelled",
        _S,
        wire=CancelScheduleReq,
        to_wire=lambda a: {"schedule_id": a.id},
        render=lambda a, r: f"schedule #{a.id} cancelled",
    ),
)
