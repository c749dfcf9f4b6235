"""The ``hyperhive`` MCP surface's tools (spec 002), forwarding to the coordinator.

Each tool validates its arguments here, is gated by its group in the
surface, and forwards over the agent's own coordinator socket — where the
same gate and the topology rules are enforced again. Results are short text
the model reads.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hyperhive.agent.mcp_surface import ToolSpec
from hyperhive.agent.runtime import AgentRuntime
from hyperhive.forge.tool import create_repo_tool
from hyperhive.permissions import Capability, ToolGroup
from hyperhive.protocol import (
    AckUntilReq,
    AskOperatorReq,
    CancelLooseEndReq,
    CancelScheduleReq,
    CompactReq,
    GetAgentMetaReq,
    GetHostJournalReq,
    GetLogsReq,
    GetLooseEndsReq,
    LifecycleReq,
    ListSchedulesReq,
    Message,
    RecvReq,
    RemindReq,
    RequestApplyCommitReq,
    RequestInitConfigReq,
    RequestUpdateMetaInputsReq,
    SchedulePromptReq,
    SendReq,
    SetStatusReq,
)
from hyperhive.protocol.agent import REMIND_MAX_BYTES

__all__ = ["hyperhive_tools"]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SendArgs(_Args):
    to: str = Field(description='An agent name, "operator", or "<parent>" for your parent.')
    body: str = Field(description="The message text.")
    in_reply_to: int | None = Field(default=None, description="A [msg #id] this answers.")


class RecvArgs(_Args):
    max: int = Field(default=1, ge=1, description="How many messages, at most 5.")


class AckArgs(_Args):
    up_to: int = Field(ge=0, description="Mark every message of yours with id ≤ this handled.")


class AskArgs(_Args):
    question: str = Field(description="The question for the operator.")


class LooseEndsArgs(_Args):
    agent: str | None = Field(default=None, description="Omit for your own; or a descendant.")


class CancelArgs(_Args):
    kind: Literal["reminder", "approval", "todo", "question", "schedule"]
    id: int = Field(ge=0, description="The row id from get_loose_ends.")


class RemindArgs(_Args):
    message: str = Field(
        description=f"What to remind yourself of; at most {REMIND_MAX_BYTES // 1024} KiB "
        "(UTF-8). Keep longer notes in a file and remind yourself of its path."
    )
    delay_seconds: float | None = Field(default=None, ge=0)
    at_unix_timestamp: float | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _one(self) -> RemindArgs:
        if (self.delay_seconds is None) == (self.at_unix_timestamp is None):
            raise ValueError("give exactly one of delay_seconds or at_unix_timestamp")
        return self


class StatusArgs(_Args):
    text: str = Field(description='One line, at most 200 characters; "" clears it.')


class MetaArgs(_Args):
    name: str | None = Field(default=None, description="Omit for yourself.")


class NoArgs(_Args):
    """A tool that takes no arguments (and refuses any)."""


class ScheduleArgs(_Args):
    target: str = Field(description="Yourself or one of your descendants.")
    prompt: str = Field(description="What the target is told at each firing.")
    every_seconds: float | None = Field(default=None, ge=60)
    cron: str | None = Field(default=None, description="A 5-field cron expression (UTC).")

    @model_validator(mode="after")
    def _one(self) -> ScheduleArgs:
        if (self.every_seconds is None) == (self.cron is None):
            raise ValueError("give exactly one of every_seconds or cron")
        return self


class ScheduleIdArgs(_Args):
    id: int = Field(ge=0, description="The schedule id from list_schedules.")


def _json(value: Any) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False)


async def _send(rt: AgentRuntime, a: SendArgs) -> str:
    r = await rt.call(SendReq(cmd="send", to=a.to, body=a.body, in_reply_to=a.in_reply_to))
    return f"sent [msg #{r['id']}] to {r['to']}"


async def _recv(rt: AgentRuntime, a: RecvArgs) -> str:
    rows = await rt.call(RecvReq(cmd="recv", max=a.max))
    if not rows:
        return "inbox empty"
    return "\n".join(Message.model_validate(r).render() for r in rows)


async def _ack(rt: AgentRuntime, a: AckArgs) -> str:
    r = await rt.call(AckUntilReq(cmd="ack_until", up_to=a.up_to))
    return f"acked {r['acked']} message(s) up to #{a.up_to}"


async def _ask(rt: AgentRuntime, a: AskArgs) -> str:
    r = await rt.call(AskOperatorReq(cmd="ask_operator", question=a.question))
    return (
        f"question #{r['question_id']} sent to the operator as [msg #{r['message_id']}]; "
        "the answer arrives in your inbox in reply to it"
    )


async def _loose_ends(rt: AgentRuntime, a: LooseEndsArgs) -> str:
    rows = await rt.call(GetLooseEndsReq(cmd="get_loose_ends", agent=a.agent))
    return _json(rows) if rows else "no loose ends"


async def _cancel(rt: AgentRuntime, a: CancelArgs) -> str:
    r = await rt.call(CancelLooseEndReq(cmd="cancel_loose_end", kind=a.kind, row_id=a.id))
    return f"{a.kind} #{a.id} " + ("cancelled" if r["cancelled"] else "was already closed")


async def _remind(rt: AgentRuntime, a: RemindArgs) -> str:
    r = await rt.call(
        RemindReq(
            cmd="remind",
            message=a.message,
            delay_seconds=a.delay_seconds,
            at_unix_timestamp=a.at_unix_timestamp,
        )
    )
    return f"reminder #{r['id']} set for unix time {r['due_at']:.0f}"


async def _status(rt: AgentRuntime, a: StatusArgs) -> str:
    r = await rt.call(SetStatusReq(cmd="set_status", text=a.text))
    rt.bus.status_text = r["status_text"]
    return "status cleared" if not r["status_text"] else f"status: {r['status_text']}"


async def _meta(rt: AgentRuntime, a: MetaArgs) -> str:
    return _json(await rt.call(GetAgentMetaReq(cmd="get_agent_meta", name=a.name)))


async def _compact(rt: AgentRuntime, a: NoArgs) -> str:
    r = await rt.call(CompactReq(cmd="compact"))
    return (
        f"compaction queued (last turn used {r['context_usage']:.0%} of the context); "
        "it runs after this turn ends, after a notes checkpoint"
    )


async def _schedule(rt: AgentRuntime, a: ScheduleArgs) -> str:
    r = await rt.call(
        SchedulePromptReq(
            cmd="schedule_prompt",
            target=a.target,
            prompt=a.prompt,
            every_seconds=a.every_seconds,
            cron=a.cron,
        )
    )
    return f"schedule #{r['id']} created for {a.target}"


async def _list_schedules(rt: AgentRuntime, a: NoArgs) -> str:
    rows = await rt.call(ListSchedulesReq(cmd="list_schedules"))
    return _json(rows) if rows else "no schedules"


async def _cancel_schedule(rt: AgentRuntime, a: ScheduleIdArgs) -> str:
    await rt.call(CancelScheduleReq(cmd="cancel_schedule", schedule_id=a.id))
    return f"schedule #{a.id} cancelled"


class InitConfigArgs(_Args):
    name: str = Field(description="The child's name (new, or your existing direct child).")
    config: str = Field(default="", description="The child's agent.toml text ('' = defaults).")


class ApplyCommitArgs(_Args):
    agent: str = Field(description="Yourself or a descendant.")
    commit: str = Field(default="HEAD", description="A commit of its proposed config repo.")


class AgentArgs(_Args):
    agent: str = Field(description="A descendant of yours.")


class LogsArgs(_Args):
    agent: str = Field(description="A descendant of yours.")
    lines: int = Field(default=100, ge=1, le=5000)


class LinesArgs(_Args):
    lines: int = Field(default=100, ge=1, le=5000)


class MetaInputsArgs(_Args):
    claude_version: str = Field(description="The claude CLI version to pin, e.g. 2.1.330.")
    reason: str = ""


async def _init_config(rt: AgentRuntime, a: InitConfigArgs) -> str:
    r = await rt.call(RequestInitConfigReq(cmd="request_init_config", name=a.name, config=a.config))
    return (
        f"approval #{r['approval_id']} pending: the operator decides; "
        "approval_resolved arrives in your inbox"
    )


async def _apply_commit(rt: AgentRuntime, a: ApplyCommitArgs) -> str:
    r = await rt.call(
        RequestApplyCommitReq(cmd="request_apply_commit", agent=a.agent, commit=a.commit)
    )
    return f"approval #{r['approval_id']} pending for {a.agent} at {r['commit'][:12]}"


def _verb(verb: Literal["kill", "start", "restart", "update", "destroy"]) -> Any:
    async def run(rt: AgentRuntime, a: AgentArgs) -> str:
        return _json(await rt.call(LifecycleReq(cmd=verb, agent=a.agent)))

    return run


async def _logs(rt: AgentRuntime, a: LogsArgs) -> str:
    r = await rt.call(GetLogsReq(cmd="get_logs", agent=a.agent, lines=a.lines))
    return "\n".join(r["lines"]) or f"(no log lines for {a.agent} yet)"


async def _journal(rt: AgentRuntime, a: LinesArgs) -> str:
    r = await rt.call(GetHostJournalReq(cmd="get_host_journal", lines=a.lines))
    return "\n".join(f"== {name}\n" + "\n".join(lines) for name, lines in r.items())


async def _meta_inputs(rt: AgentRuntime, a: MetaInputsArgs) -> str:
    r = await rt.call(
        RequestUpdateMetaInputsReq(
            cmd="request_update_meta_inputs", claude_version=a.claude_version, reason=a.reason
        )
    )
    return f"approval #{r['approval_id']} pending"


def _lifecycle_tools() -> list[ToolSpec]:
    lc, ap, dg = ToolGroup.LIFECYCLE, ToolGroup.APPROVALS, ToolGroup.DIAGNOSTICS
    verbs: list[tuple[Literal["kill", "start", "restart", "update", "destroy"], str]] = [
        ("kill", "Stop a descendant (it stays stopped until started)."),
        ("start", "Start a stopped descendant."),
        ("restart", "Restart a descendant (its unacked mail is redelivered)."),
        ("update", "Rebuild a descendant from its applied config."),
        ("destroy", "Remove a descendant for good (never yourself or an ancestor)."),
    ]
    return [
        ToolSpec(
            "request_init_config",
            "Ask to spawn a child (or re-init your direct child) "
            "with the given agent.toml; the operator approves.",
            InitConfigArgs,
            _init_config,
            lc,
        ),
        *[ToolSpec(v, d, AgentArgs, _verb(v), lc) for v, d in verbs],
        ToolSpec(
            "request_update_meta_inputs",
            "Root agents: ask to pin another claude CLI version for the hive.",
            MetaInputsArgs,
            _meta_inputs,
            lc,
        ),
        ToolSpec(
            "request_apply_commit",
            "Ask to apply a commit of your or a descendant's proposed config repo.",
            ApplyCommitArgs,
            _apply_commit,
            ap,
        ),
        ToolSpec("get_logs", "Tail a descendant's log.", LogsArgs, _logs, dg),
        ToolSpec(
            "get_host_journal",
            "Tail the coordinator's and agent host's logs.",
            LinesArgs,
            _journal,
            capability=Capability.READ_HOST_JOURNAL,
        ),
    ]


def hyperhive_tools() -> list[ToolSpec]:
    m, i, me, sc = ToolGroup.MESSAGING, ToolGroup.INBOX, ToolGroup.META, ToolGroup.SCHEDULING
    return [
        ToolSpec(
            "send", "Send a message to an agent, the operator or <parent>.", SendArgs, _send, m
        ),
        ToolSpec(
            "recv", "Read up to `max` (≤5) undelivered messages; never blocks.", RecvArgs, _recv, m
        ),
        ToolSpec(
            "ack_until",
            "Mark your messages with id ≤ up_to handled (never redelivered).",
            AckArgs,
            _ack,
            m,
        ),
        ToolSpec(
            "ask_operator",
            "Ask the operator a question; the answer comes as a message.",
            AskArgs,
            _ask,
            m,
        ),
        ToolSpec(
            "get_loose_ends",
            "List reminders, todos, approvals, questions, schedules.",
            LooseEndsArgs,
            _loose_ends,
            i,
        ),
        ToolSpec(
            "cancel_loose_end",
            "Cancel a reminder/approval/todo/question by id.",
            CancelArgs,
            _cancel,
            i,
        ),
        ToolSpec(
            "remind",
            "Schedule a reminder into your own inbox "
            f"(a message of at most {REMIND_MAX_BYTES // 1024} KiB).",
            RemindArgs,
            _remind,
            i,
        ),
        ToolSpec(
            "set_status",
            "Set your one-line status shown on the dashboard.",
            StatusArgs,
            _status,
            me,
        ),
        ToolSpec(
            "get_agent_meta",
            "Identity and status of an agent (yourself by default).",
            MetaArgs,
            _meta,
            me,
        ),
        ToolSpec(
            "schedule_prompt",
            "Deliver a prompt to yourself or a descendant on a schedule (every_seconds or cron).",
            ScheduleArgs,
            _schedule,
            sc,
        ),
        ToolSpec(
            "list_schedules", "Your and your descendants' schedules.", NoArgs, _list_schedules, sc
        ),
        ToolSpec(
            "cancel_schedule", "Cancel a schedule by id.", ScheduleIdArgs, _cancel_schedule, sc
        ),
        *_lifecycle_tools(),
        create_repo_tool(),
        ToolSpec(
            "compact",
            "Ask for your context to be compacted after this turn (only above 66% usage).",
            NoArgs,
            _compact,
        ),
    ]
