"""The ``hyperhive`` MCP surface's tools (spec 002), forwarding to the coordinator.

Each tool validates its arguments here, is gated by its group in the
surface, and forwards over the agent's own coordinator socket — where the
same gate and the topology rules are enforced again. Results are short text
the model reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic_core import to_jsonable_python

from hyperhive.agent.hyperhive_args import (
    AckArgs,
    AgentArgs,
    ApplyCommitArgs,
    AskArgs,
    CancelArgs,
    InitConfigArgs,
    LinesArgs,
    LogsArgs,
    LooseEndsArgs,
    MetaArgs,
    MetaInputsArgs,
    NoArgs,
    RecvArgs,
    RemindArgs,
    ScheduleArgs,
    ScheduleIdArgs,
    SendArgs,
    StatusArgs,
)
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


def _json(value: Any) -> str:
    """Results as the model reads them: JSON by wire alias (``from``, not ``sender``)."""
    return json.dumps(to_jsonable_python(value, by_alias=True), indent=1, ensure_ascii=False)


async def _send(rt: AgentRuntime, a: SendArgs) -> str:
    r = await rt.call(SendReq(cmd="send", to=a.to, body=a.body, in_reply_to=a.in_reply_to))
    return f"sent [msg #{r.id}] to {r.to}"


async def _recv(rt: AgentRuntime, a: RecvArgs) -> str:
    rows = await rt.call(RecvReq(cmd="recv", max=a.max))
    if not rows:
        return "inbox empty"
    return "\n".join(r.render() for r in rows)


async def _ack(rt: AgentRuntime, a: AckArgs) -> str:
    r = await rt.call(AckUntilReq(cmd="ack_until", up_to=a.up_to))
    return f"acked {r.acked} message(s) up to #{a.up_to}"


async def _ask(rt: AgentRuntime, a: AskArgs) -> str:
    r = await rt.call(AskOperatorReq(cmd="ask_operator", question=a.question))
    return (
        f"question #{r.question_id} sent to the operator as [msg #{r.message_id}]; "
        "the answer arrives in your inbox in reply to it"
    )


async def _loose_ends(rt: AgentRuntime, a: LooseEndsArgs) -> str:
    rows = await rt.call(GetLooseEndsReq(cmd="get_loose_ends", agent=a.agent))
    return _json(rows) if rows else "no loose ends"


async def _cancel(rt: AgentRuntime, a: CancelArgs) -> str:
    r = await rt.call(CancelLooseEndReq(cmd="cancel_loose_end", kind=a.kind, row_id=a.id))
    return f"{a.kind} #{a.id} " + ("cancelled" if r.cancelled else "was already closed")


async def _remind(rt: AgentRuntime, a: RemindArgs) -> str:
    r = await rt.call(
        RemindReq(
            cmd="remind",
            message=a.message,
            delay_seconds=a.delay_seconds,
            at_unix_timestamp=a.at_unix_timestamp,
        )
    )
    return f"reminder #{r.id} set for unix time {r.due_at:.0f}"


async def _status(rt: AgentRuntime, a: StatusArgs) -> str:
    r = await rt.call(SetStatusReq(cmd="set_status", text=a.text))
    rt.bus.status_text = r.status_text
    return "status cleared" if not r.status_text else f"status: {r.status_text}"


async def _meta(rt: AgentRuntime, a: MetaArgs) -> str:
    meta = await rt.call(GetAgentMetaReq(cmd="get_agent_meta", name=a.name))
    # Spec 002: matrix_accounts is omitted for an agent with no Matrix provisioning.
    return _json(
        meta.model_dump(
            by_alias=True, exclude={"matrix_accounts"} if meta.matrix_accounts is None else None
        )
    )


async def _compact(rt: AgentRuntime, a: NoArgs) -> str:
    r = await rt.call(CompactReq(cmd="compact"))
    return (
        f"compaction queued (last turn used {r.context_usage:.0%} of the context); "
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
    return f"schedule #{r.id} created for {a.target}"


async def _list_schedules(rt: AgentRuntime, a: NoArgs) -> str:
    rows = await rt.call(ListSchedulesReq(cmd="list_schedules"))
    return _json(rows) if rows else "no schedules"


async def _cancel_schedule(rt: AgentRuntime, a: ScheduleIdArgs) -> str:
    await rt.call(CancelScheduleReq(cmd="cancel_schedule", schedule_id=a.id))
    return f"schedule #{a.id} cancelled"


async def _init_config(rt: AgentRuntime, a: InitConfigArgs) -> str:
    r = await rt.call(RequestInitConfigReq(cmd="request_init_config", name=a.name, config=a.config))
    return (
        f"approval #{r.approval_id} pending: the operator decides; "
        "approval_resolved arrives in your inbox"
    )


async def _apply_commit(rt: AgentRuntime, a: ApplyCommitArgs) -> str:
    r = await rt.call(
        RequestApplyCommitReq(cmd="request_apply_commit", agent=a.agent, commit=a.commit)
    )
    return f"approval #{r.approval_id} pending for {a.agent} at {(r.commit or '')[:12]}"


def _verb(verb: Literal["kill", "start", "restart", "update", "destroy"]) -> Any:
    async def run(rt: AgentRuntime, a: AgentArgs) -> str:
        return _json(await rt.call(LifecycleReq(cmd=verb, agent=a.agent)))

    return run


async def _logs(rt: AgentRuntime, a: LogsArgs) -> str:
    r = await rt.call(GetLogsReq(cmd="get_logs", agent=a.agent, lines=a.lines))
    return "\n".join(r.lines) or f"(no log lines for {a.agent} yet)"


async def _journal(rt: AgentRuntime, a: LinesArgs) -> str:
    r = await rt.call(GetHostJournalReq(cmd="get_host_journal", lines=a.lines))
    journal = {"coordinator": r.coordinator, "host": r.host}
    return "\n".join(f"== {name}\n" + "\n".join(lines) for name, lines in journal.items())


async def _meta_inputs(rt: AgentRuntime, a: MetaInputsArgs) -> str:
    r = await rt.call(
        RequestUpdateMetaInputsReq(
            cmd="request_update_meta_inputs", claude_version=a.claude_version, reason=a.reason
        )
    )
    return f"approval #{r.approval_id} pending"


def _config_repo(hive_home: Path | None) -> str:
    where = f"{hive_home}/agents/<agent>/config" if hive_home else "agents/<agent>/config"
    return (
        f"Its proposed config repo is the git repo {where} (under the hive home, in your "
        "sandbox): edit agent.toml there, commit it (git -C <repo> commit -am '<why>' via "
        "mcp__bash__run), then call this."
    )


def _lifecycle_tools(hive_home: Path | None) -> list[ToolSpec]:
    lc, ap, dg = ToolGroup.LIFECYCLE, ToolGroup.APPROVALS, ToolGroup.DIAGNOSTICS
    verbs: list[tuple[Literal["kill", "start", "restart", "update", "destroy"], str]] = [
        ("kill", "Stop a descendant; it stays stopped (mail queues) until start."),
        ("start", "Start a stopped descendant."),
        ("restart", "Restart a descendant; its unacked mail is redelivered."),
        ("update", "Rebuild a descendant from its applied config."),
        ("destroy", "Remove a descendant for good (never yourself or an ancestor)."),
    ]
    return [
        ToolSpec(
            "request_init_config",
            "Ask to spawn a child under you (or re-init your direct child) with this agent.toml. "
            "The operator approves: approval_resolved arrives in your inbox, then spawned and "
            "config_ready todos. A new child starts idle: send it its task.",
            InitConfigArgs,
            _init_config,
            lc,
        ),
        *[ToolSpec(v, d, AgentArgs, _verb(v), lc) for v, d in verbs],
        ToolSpec(
            "request_update_meta_inputs",
            "Ask the operator to pin another claude CLI version for the hive (recorded in the "
            "meta repo; installing it is the operator's step).",
            MetaInputsArgs,
            _meta_inputs,
            lc,
        ),
        ToolSpec(
            "request_apply_commit",
            "Ask to apply a commit of your or a descendant's proposed config; the operator "
            "approves, then the agent is rebuilt with it. " + _config_repo(hive_home),
            ApplyCommitArgs,
            _apply_commit,
            ap,
        ),
        ToolSpec("get_logs", "The last lines of a descendant's log.", LogsArgs, _logs, dg),
        ToolSpec(
            "get_host_journal",
            "The last lines of the coordinator's and the agent host's logs.",
            LinesArgs,
            _journal,
            capability=Capability.READ_HOST_JOURNAL,
        ),
    ]


def hyperhive_tools(hive_home: Path | None = None) -> list[ToolSpec]:
    """The surface's tools; ``hive_home`` puts the real config repo path in a description."""
    m, i, me, sc = ToolGroup.MESSAGING, ToolGroup.INBOX, ToolGroup.META, ToolGroup.SCHEDULING
    return [
        ToolSpec(
            "send",
            "Message an agent, the operator or your parent (a sleeping agent wakes).",
            SendArgs,
            _send,
            m,
        ),
        ToolSpec(
            "recv",
            "Read mail that did not come with your wake; never blocks. Rows are "
            "[msg #N] from X: body; note the highest N you handled, then ack_until(N). A row "
            "from graceful-stop: you are being stopped; save notes, end the turn.",
            RecvArgs,
            _recv,
            m,
        ),
        ToolSpec(
            "ack_until",
            "Mark your messages up to #N handled (never redelivered): for mail you recv'd; "
            "mail that woke you is acked with the turn.",
            AckArgs,
            _ack,
            m,
        ),
        ToolSpec(
            "ask_operator",
            "Ask the operator for a decision you are blocked on; tracked as an open question, "
            'the answer arrives as a reply. For reports, send(to="operator").',
            AskArgs,
            _ask,
            m,
        ),
        ToolSpec(
            "get_loose_ends",
            "What is open for you: todos (results of bash tasks, subagents, lifecycle "
            "notices), reminders, approvals, questions, schedules. Summaries are cut at 200 "
            "chars; Read a bash todo's output files for the rest.",
            LooseEndsArgs,
            _loose_ends,
            i,
        ),
        ToolSpec(
            "cancel_loose_end",
            "Close a row: clear a todo you handled, drop a reminder, withdraw a question or "
            "approval, stop a schedule (schedule_prompt).",
            CancelArgs,
            _cancel,
            i,
        ),
        ToolSpec(
            "remind",
            "A message to yourself later (from reminder): exactly one of delay_seconds or "
            f"at_unix_timestamp. At most 50 pending (default cap), each at most "
            f"{REMIND_MAX_BYTES // 1024} KiB.",
            RemindArgs,
            _remind,
            i,
        ),
        ToolSpec(
            "set_status",
            "Your one-line status on the dashboard.",
            StatusArgs,
            _status,
            me,
        ),
        ToolSpec(
            "get_agent_meta",
            "An agent's name, parent, running state and status.",
            MetaArgs,
            _meta,
            me,
        ),
        ToolSpec(
            "schedule_prompt",
            "Send yourself or a descendant a prompt on a schedule: exactly one of "
            "every_seconds or cron.",
            ScheduleArgs,
            _schedule,
            sc,
        ),
        ToolSpec(
            "list_schedules", "Your and your descendants' schedules.", NoArgs, _list_schedules, sc
        ),
        ToolSpec("cancel_schedule", "Stop a schedule.", ScheduleIdArgs, _cancel_schedule, sc),
        *_lifecycle_tools(hive_home),
        create_repo_tool(),
        ToolSpec(
            "compact",
            "Have your context compacted after this turn (a notes checkpoint runs first). "
            "Refused below 66% context use.",
            NoArgs,
            _compact,
        ),
    ]
