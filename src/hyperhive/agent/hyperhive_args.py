"""Argument models of the ``hyperhive`` surface's tools, with what the model reads.

Each field's description reaches the model in every request (as the tool's
JSON schema, made lean by :func:`~hyperhive.agent.mcp_surface.lean_schema`),
so it says what the model needs to call the tool right, briefly: which id
goes where, which arguments exclude each other, what a default means.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hyperhive.protocol.agent import REMIND_MAX_BYTES

__all__ = [
    "AGENT_TOML_KEYS",
    "AckArgs",
    "AgentArgs",
    "ApplyCommitArgs",
    "AskArgs",
    "CancelArgs",
    "InitConfigArgs",
    "LinesArgs",
    "LogsArgs",
    "LooseEndsArgs",
    "MetaArgs",
    "NoArgs",
    "RecvArgs",
    "RemindArgs",
    "ScheduleArgs",
    "ScheduleIdArgs",
    "SendArgs",
    "StatusArgs",
]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SendArgs(_Args):
    to: str = Field(
        description='An agent name, "operator", or "<parent>" (your parent; the operator '
        "for a root)."
    )
    body: str = Field(description="The message text.")
    in_reply_to: int | None = Field(
        default=None, description="The N of the [msg #N] this answers (threads it)."
    )


class RecvArgs(_Args):
    max: int = Field(default=1, ge=1, description="How many messages, 1-5.")


class AckArgs(_Args):
    up_to: int = Field(ge=0, description="The highest [msg #N] you handled.")


class AskArgs(_Args):
    question: str = Field(description="The decision you need, with what the operator must know.")


class LooseEndsArgs(_Args):
    agent: str | None = Field(
        default=None, description="A descendant (others: query_agent_state); omit for yours."
    )


class CancelArgs(_Args):
    kind: Literal["reminder", "approval", "todo", "question", "schedule"]
    id: int = Field(ge=0, description="The row's id from get_loose_ends (not a task id).")


class RemindArgs(_Args):
    message: str = Field(
        description=f"What to tell yourself when it fires; at most {REMIND_MAX_BYTES // 1024} "
        "KiB (longer: write a file, remind yourself of its path)."
    )
    delay_seconds: float | None = Field(default=None, ge=0, description="Fire in N seconds.")
    at_unix_timestamp: float | None = Field(default=None, ge=0, description="Or fire at this time.")

    @model_validator(mode="after")
    def _one(self) -> RemindArgs:
        if (self.delay_seconds is None) == (self.at_unix_timestamp is None):
            raise ValueError("give exactly one of delay_seconds or at_unix_timestamp")
        return self


class StatusArgs(_Args):
    text: str = Field(description='One line, at most 200 characters; "" clears it.')


class MetaArgs(_Args):
    name: str | None = Field(default=None, description="An agent; omit for yourself.")


class NoArgs(_Args):
    """A tool that takes no arguments (and refuses any)."""


class ScheduleArgs(_Args):
    target: str = Field(description="Yourself or one of your descendants.")
    prompt: str = Field(description="The message it gets at each firing (from `reminder`).")
    every_seconds: float | None = Field(default=None, ge=60, description="An interval, ≥ 60.")
    cron: str | None = Field(default=None, description="Or a 5-field cron expression (UTC).")

    @model_validator(mode="after")
    def _one(self) -> ScheduleArgs:
        if (self.every_seconds is None) == (self.cron is None):
            raise ValueError("give exactly one of every_seconds or cron")
        return self


class ScheduleIdArgs(_Args):
    id: int = Field(ge=0, description="The schedule's id from list_schedules.")


AGENT_TOML_KEYS = (
    'agent.toml keys, all optional: model (str), subagent_model (str, "haiku"), '
    "tool_groups (list, default [messaging, meta, inbox, execution]; also lifecycle, "
    "approvals, scheduling, diagnostics, web_tools), capabilities (list: read_host_journal, "
    "query_agent_state), allowed_recipients (list, [] = anyone), system_prompt (str, appended "
    "to its system prompt), env (table), [limits] memory_mb/pids/cpu_percent, "
    '[mcp_servers.<name>] extra MCP servers. Example: \'model = "sonnet"\\n'
    'system_prompt = "You keep the docs current."\'. The hive-children skill has them all.'
)


class InitConfigArgs(_Args):
    name: str = Field(description="The child's name: new, or your existing direct child.")
    config: str = Field(
        default="", description="Its agent.toml text; '' = defaults. " + AGENT_TOML_KEYS
    )


class ApplyCommitArgs(_Args):
    agent: str = Field(description="Yourself or a descendant.")
    commit: str = Field(default="HEAD", description="A commit of its proposed config repo.")


class AgentArgs(_Args):
    agent: str = Field(description="A descendant of yours.")


class LogsArgs(_Args):
    agent: str = Field(description="A descendant of yours.")
    lines: int = Field(default=100, ge=1, le=5000, description="How many of the last lines.")


class LinesArgs(_Args):
    lines: int = Field(default=100, ge=1, le=5000, description="How many of the last lines.")
