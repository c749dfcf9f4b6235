"""Requests on an agent's own socket (harness, MCP surfaces, in-sandbox producers).

The requests the ``hyperhive`` MCP tools become are declared with their tools
(:mod:`hyperhive.tools`) and join ``AgentRequest`` from the catalog; this
module adds the harness's and the in-sandbox producers' own.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field

from hyperhive.protocol.base import (
    Created,
    Req,
    RowId,
    WaitResult,
    _Out,
)
from hyperhive.protocol.budget import ModelSpend, RecordSpendReq, RunSpend
from hyperhive.tools.approvals import RequestApplyCommitReq
from hyperhive.tools.catalog import wire_requests
from hyperhive.tools.diagnostics import GetHostJournalReq, GetLogsReq, HostJournal
from hyperhive.tools.inbox import (
    REMIND_MAX_BYTES,
    CancelLooseEndReq,
    GetLooseEndsReq,
    Reminded,
    RemindReq,
)
from hyperhive.tools.lifecycle import LifecycleReq, RequestInitConfigReq
from hyperhive.tools.messaging import AckUntilReq, Asked, AskOperatorReq, RecvReq, SendReq
from hyperhive.tools.meta import CompactReq, GetAgentMetaReq, SetStatusReq, StatusSet
from hyperhive.tools.scheduling import (
    CancelScheduleReq,
    ListSchedulesReq,
    Schedule,
    SchedulePromptReq,
)

__all__ = [
    "REMIND_MAX_BYTES",
    "AckUntilReq",
    "AgentRequest",
    "AskOperatorReq",
    "Asked",
    "AttachReq",
    "Attached",
    "CancelLooseEndReq",
    "CancelScheduleReq",
    "Cleared",
    "CompactReq",
    "FenceReq",
    "GetAgentMetaReq",
    "GetHostJournalReq",
    "GetLogsReq",
    "GetLooseEndsReq",
    "HostJournal",
    "LifecycleReq",
    "ListSchedulesReq",
    "RecvReq",
    "Reminded",
    "RemindReq",
    "RequestApplyCommitReq",
    "RequestInitConfigReq",
    "Schedule",
    "SchedulePromptReq",
    "SendReq",
    "SetStatusReq",
    "StatusSet",
    "ActivityReported",
    "CreateRepoReq",
    "ForgeTokenIssued",
    "ForgeTokenReq",
    "MatrixAccountReq",
    "MatrixSignedIn",
    "RepoCreated",
    "ReportActivityReq",
    "TodoClearReq",
    "TodoUpsertReq",
    "TurnEndReq",
    "TurnEnded",
    "WaitReq",
    "WakeReq",
]

# ---- results only this socket gives ---------------------------------------


class Attached(_Out):
    incarnation: int
    agent: str


class TurnEnded(_Out):
    compact_pending: bool
    # What the turn's run was counted at (None: the turn_end carried no spend).
    spend: ModelSpend | None = None


class Cleared(_Out):
    cleared: bool


# ---- the harness and in-sandbox producers ----------------------------------


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
    # What the run reported about its cost; counted once per run_id to the agent's budget.
    spend: RunSpend | None = None


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


class ActivityReported(_Out):
    recorded: bool


class ReportActivityReq(Req[ActivityReported]):
    """From the agent's host: one of this agent's bash tasks or subagents started or
    finished (the dashboard's feed). The agent is the socket's, never the body's."""

    cmd: Literal["report_activity"]
    kind: Literal["bash", "subagent"]
    # "ran": started and finished inside the tool call's wait (one event, not two)
    phase: Literal["started", "finished", "ran"]
    ref: str = Field(min_length=1, max_length=128)  # the task's or subagent's id
    summary: str = Field(max_length=300)  # the command or task, previewed
    status: str | None = Field(default=None, max_length=32)
    exit_code: int | None = None
    # The host's name for this report: a resent one lands once.
    event_id: str = Field(min_length=8, max_length=80, pattern=r"^[A-Za-z0-9_.:-]+$")


class WakeReq(Req[Created]):
    """From an in-sandbox producer: lands as a message from ``from`` and wakes."""

    cmd: Literal["wake"]
    sender: str = Field(alias="from")
    body: str
    # The producer's id for what it delivers (a notification, an event): a wake
    # repeated with the same key lands once, so a producer that died before
    # noting a delivery sends it again without waking the agent twice.
    key: str | None = Field(default=None, min_length=1, max_length=256)


# ---- the agent's own identities, issued by the coordinator (issue #14) -------
#
# The coordinator alone holds the forge's admin token and the homeserver's admin
# secret. An agent's host asks on the agent's socket (so for that agent only, and
# for a remote host only while it holds the agent at its incarnation) and gets back
# that agent's own credential, nothing hive-wide.


class ForgeTokenIssued(_Out):
    user: str
    token: str


class ForgeTokenReq(Req[ForgeTokenIssued]):
    """Provision the agent's forge user (made, or taken back) and issue it a fresh token;
    the previous one stops working. Needs the ``forge`` group."""

    cmd: Literal["forge_token"]


class RepoCreated(_Out):
    full_name: str
    clone_url: str
    web_url: str
    default_branch: str
    private: bool


class CreateRepoReq(Req[RepoCreated]):
    """``create_repo``'s administrative half (the org's repository, the agent a write
    collaborator, the default branch protected). Its own name, not the tool's: the tool
    runs on the host (it provisions the identity first). Needs the ``forge`` group."""

    cmd: Literal["forge_create_repo"]
    name: str = Field(min_length=1, max_length=100)
    description: str = Field(default="", max_length=2048)
    private: bool = False


class MatrixSignedIn(_Out):
    user_id: str
    device_id: str
    access_token: str
    homeserver: str


class MatrixAccountReq(Req[MatrixSignedIn]):
    """The agent's Matrix account (made if missing) and a new device's access token.
    Needs ``[matrix] enabled`` in its applied config."""

    cmd: Literal["matrix_account"]


_OWN: tuple[type[Req[Any]], ...] = (
    WaitReq,
    AttachReq,
    FenceReq,
    TurnEndReq,
    TodoUpsertReq,
    TodoClearReq,
    WakeReq,
    RecordSpendReq,
    ReportActivityReq,
    ForgeTokenReq,
    CreateRepoReq,
    MatrixAccountReq,
)

# Built at import from the catalog: a tool declared with a ``wire`` request is
# spoken here with no second list.
AgentRequest: Any = Annotated[
    Union[(*_OWN, *wire_requests())],  # noqa: UP007 (a runtime tuple of members)
    Field(discriminator="cmd"),
]
