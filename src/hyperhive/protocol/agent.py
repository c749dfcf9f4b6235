"""Requests on an agent's own socket (harness, MCP surfaces, in-sandbox producers)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
    model_validator,
)

from hyperhive.protocol.base import (
    Acked,
    AgentMeta,
    ApprovalRequested,
    Cancelled,
    CompactQueued,
    Created,
    LifecycleResult,
    LogTail,
    LooseEnd,
    LooseEndKind,
    Message,
    Req,
    RowId,
    Sent,
    WaitResult,
    _Out,
)

# ---- results only this socket gives ---------------------------------------


class Attached(_Out):
    incarnation: int
    agent: str


class TurnEnded(_Out):
    compact_pending: bool


class Reminded(_Out):
    id: int
    due_at: float


class Cleared(_Out):
    cleared: bool


class StatusSet(_Out):
    status_text: str


class Asked(_Out):
    question_id: int
    message_id: int


class Schedule(_Out):
    id: int
    owner: str
    target: str
    prompt: str
    every_seconds: float | None
    cron: str | None
    next_at: float
    created_at: float


class HostJournal(_Out):
    """The coordinator's and agent host's own log tails."""

    coordinator: list[str]
    host: list[str]


# ---- agent socket ---------------------------------------------------------


class SendReq(Req[Sent]):
    cmd: Literal["send"]
    to: str
    body: str
    in_reply_to: RowId | None = None


class RecvReq(Req[list[Message]]):
    cmd: Literal["recv"]
    max: int = Field(default=1, ge=1, le=2**31)


class AckUntilReq(Req[Acked]):
    cmd: Literal["ack_until"]
    up_to: RowId


class WaitReq(Req[WaitResult]):
    cmd: Literal["wait"]
    timeout: float = Field(default=30.0, ge=0, le=3600)
    todo_version: RowId = 0


class AttachReq(Req[Attached]):
    """A new harness incarnation: unacked deliveries of the old one redeliver."""

    cmd: Literal["attach"]


class FenceReq(Req[None]):
    """Graceful stop begins: ``recv`` answers the graceful-stop message."""

    cmd: Literal["fence"]


class TurnEndReq(Req[TurnEnded]):
    cmd: Literal["turn_end"]
    outcome: Literal["ok", "error", "api_error", "needs_login", "interrupted"]
    handled: list[RowId] = Field(default_factory=list, max_length=10_000)
    context_usage: float | None = Field(default=None, ge=0)
    session_id: str | None = None
    cost_usd: float | None = None


# A reminder is a note to self, stored until it fires (longer ones spill to a file
# in the agent's state/): held to a stated size so an agent cannot park megabytes.
REMIND_MAX_BYTES = 64 * 1024


class RemindReq(Req[Reminded]):
    cmd: Literal["remind"]
    message: str
    delay_seconds: float | None = Field(default=None, ge=0)
    at_unix_timestamp: float | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _exactly_one(self) -> RemindReq:
        if (self.delay_seconds is None) == (self.at_unix_timestamp is None):
            raise ValueError("give exactly one of delay_seconds or at_unix_timestamp")
        return self


class GetLooseEndsReq(Req[list[LooseEnd]]):
    cmd: Literal["get_loose_ends"]
    agent: str | None = None


class CancelLooseEndReq(Req[Cancelled]):
    cmd: Literal["cancel_loose_end"]
    kind: LooseEndKind
    row_id: RowId


class TodoUpsertReq(Req[Created]):
    cmd: Literal["todo_upsert"]
    subsystem: str = Field(min_length=1, max_length=64)
    key: str = Field(min_length=1, max_length=128)
    body: str
    # False: the agent's own turn caused it (a task still running past its window),
    # so it is listed but wakes no turn; a later waking upsert of the key does.
    wake: bool = True


class TodoClearReq(Req[Cleared]):
    cmd: Literal["todo_clear"]
    subsystem: str = Field(min_length=1, max_length=64)
    key: str = Field(min_length=1, max_length=128)


class SetStatusReq(Req[StatusSet]):
    cmd: Literal["set_status"]
    text: str


class GetAgentMetaReq(Req[AgentMeta]):
    cmd: Literal["get_agent_meta"]
    name: str | None = None


class WakeReq(Req[Created]):
    """From an in-sandbox producer: lands as a message from ``from`` and wakes."""

    cmd: Literal["wake"]
    sender: str = Field(alias="from")
    body: str
    # The producer's id for what it delivers (a notification, an event): a wake
    # repeated with the same key lands once, so a producer that died before
    # noting a delivery sends it again without waking the agent twice.
    key: str | None = Field(default=None, min_length=1, max_length=256)


class CompactReq(Req[CompactQueued]):
    cmd: Literal["compact"]


class AskOperatorReq(Req[Asked]):
    cmd: Literal["ask_operator"]
    question: str


class SchedulePromptReq(Req[Created]):
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


class ListSchedulesReq(Req[list[Schedule]]):
    cmd: Literal["list_schedules"]


class CancelScheduleReq(Req[Cancelled]):
    cmd: Literal["cancel_schedule"]
    schedule_id: RowId


class RequestInitConfigReq(Req[ApprovalRequested]):
    """Spawn (or re-init) a direct child: ``config`` is the child's agent.toml text."""

    cmd: Literal["request_init_config"]
    name: str
    config: str = ""


class RequestApplyCommitReq(Req[ApprovalRequested]):
    """Apply a commit of ``agent``'s proposed config repo (own or a descendant's)."""

    cmd: Literal["request_apply_commit"]
    agent: str
    commit: str = Field(default="HEAD", min_length=1, max_length=64)


class LifecycleReq(Req[LifecycleResult]):
    """``kill``/``start``/``restart``/``update``/``destroy`` of a descendant."""

    cmd: Literal["kill", "start", "restart", "update", "destroy"]
    agent: str


class GetLogsReq(Req[LogTail]):
    cmd: Literal["get_logs"]
    agent: str
    lines: int = Field(default=100, ge=1, le=5000)


class GetHostJournalReq(Req[HostJournal]):
    cmd: Literal["get_host_journal"]
    lines: int = Field(default=100, ge=1, le=5000)


class RequestUpdateMetaInputsReq(Req[ApprovalRequested]):
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
