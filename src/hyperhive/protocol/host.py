"""Requests on the operator socket (``hivectl``, the dashboard)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
    JsonValue,
)

from hyperhive.config import AgentConfig
from hyperhive.protocol.approvals import PayloadView
from hyperhive.protocol.base import (
    Acked,
    ApprovalRequested,
    Cancelled,
    CompactQueued,
    LifecycleResult,
    LogTail,
    LooseEnd,
    LooseEndKind,
    Message,
    Req,
    RowId,
    Sent,
    TurnStateName,
    _Out,
)
from hyperhive.protocol.budget import OpBudgetReq, OpBudgetSetReq, OpSpendReq, OpSpendSeriesReq
from hyperhive.protocol.hostreads import AgentSnapshot
from hyperhive.protocol.link import HostCapacity
from hyperhive.protocol.move import OpAgentMoveReq

# ---- results (keys promised by docs/cli-json.md are never renamed) ---------


class AgentView(_Out):
    """One row of ``hivectl agents list``."""

    name: str
    parent: str | None
    running: bool
    host: str | None
    turn_state: TurnStateName
    turn_state_since: float | None
    status_text: str
    needs_login: bool
    broken: str | None
    # Why its host cannot start its claude (missing, or out of its user's reach) and the
    # remedy: it takes no turns, its mail waits, until that is fixed.
    launch_problem: str | None = None
    # The spend limit this agent (or the hive) reached: it takes no turns until raised.
    over_budget: str | None = None
    crashed: str | None
    unread_operator_messages: int
    last_context_usage: float | None
    config_warnings: list[str] = []
    # The agent host it is assigned to (it runs there when it runs), pinned by the
    # operator or placed, and an ``agents move`` in progress ("draining", "copying",
    # "cleanup": the source still has to drop its copy).
    assigned_host: str | None = None
    pinned: bool = False
    move_to: str | None = None
    move_phase: str | None = None
    # The host whose lease expired while it held this agent: ``lost`` until it comes
    # back (on_host_loss = "wait") or the agent is re-placed ("replace").
    lost_on: str | None = None


class ParentSet(_Out):
    changed: bool
    topology: dict[str, str | None]


class Question(_Out):
    id: int
    asker: str
    question: str
    message_id: int | None
    state: str
    answer: str | None
    created_at: float
    answered_at: float | None


class Answered(_Out):
    asker: str
    message_id: int


class SpawnResult(_Out):
    name: str
    parent: str | None
    running: bool


class WaitingSlot(_Out):
    """An agent queued for one of its host's claude slots, since ``since``."""

    agent: str
    since: float


class HiveStatus(_Out):
    home: str
    agents: int
    running: int
    hosts: list[str]
    claude_slots: dict[str, int | None]
    waiting_slot: list[WaitingSlot]
    lost: dict[str, str] = {}  # agent -> the host it was lost with
    roots: list[str]
    schema_version: int
    pid: int


class Mailbox(_Out):
    inbox: list[Message]
    outbox: list[Message]


class ApprovalView(_Out):
    id: int
    # update_meta_inputs: a request this hive no longer takes (only denied or cancelled).
    kind: Literal["init_config", "apply_commit", "update_meta_inputs"]
    requester: str
    subject: str
    state: Literal["pending", "approved", "denied"]
    created_at: float
    resolution: str | None


class EffectiveView(_Out):
    """An agent as a config would make it: what the operator sees before approving."""

    agent: str
    parent: str | None
    toml: str
    tool_groups: list[str]
    capabilities: list[str]
    mcp_servers: list[str]
    tools_arg: str
    allowed_tools_arg: str


class ApprovalDetail(ApprovalView):
    """An approval with what was asked (its kind's model, or the row as stored and why
    it cannot be carried out) and, for config changes, the diff to apply and
    ``effective``: what approving makes of the agent."""

    payload: PayloadView
    diff: str | None = None
    effective: EffectiveView | None = None


class ApprovalOutcome(_Out):
    approval_id: int
    state: Literal["approved", "denied"]
    meta_commit: str | None = None
    note: str | None = None


class AgentConfigView(_Out):
    """An agent's applied config and the exact tool arguments its turns get."""

    agent: str
    config: dict[str, JsonValue]
    tool_groups: list[str]
    capabilities: list[str]
    tools_arg: str
    allowed_tools_arg: str


class ForgeView(_Out):
    """An agent's forge user and repositories, as the operator sees them."""

    granted: bool
    configured: bool
    url: str | None = None
    org: str | None = None
    user: str | None = None
    user_url: str | None = None
    active: bool | None = None
    repos: list[str] = []
    problem: str | None = None


# ---- operator socket ------------------------------------------------------


class OpSendReq(Req[Sent]):
    cmd: Literal["send"]
    to: str
    body: str
    in_reply_to: RowId | None = None


class OpInboxReq(Req[list[Message]]):
    cmd: Literal["inbox"]
    limit: int = Field(default=50, ge=1, le=1000)
    unread_only: bool = False


class OpOutboxReq(Req[list[Message]]):
    """Messages the operator sent (newest ``limit``, oldest first)."""

    cmd: Literal["outbox"]
    limit: int = Field(default=50, ge=1, le=1000)


class OpAckReq(Req[Acked]):
    cmd: Literal["ack_until"]
    up_to: RowId


class OpAgentsReq(Req[list[AgentView]]):
    cmd: Literal["agents"]


class OpSetParentReq(Req[ParentSet]):
    cmd: Literal["set_parent"]
    child: str
    new_parent: str | None = None


class OpTopologyReq(Req[dict[str, str | None]]):
    cmd: Literal["topology"]


class OpLooseEndsReq(Req[list[LooseEnd]]):
    cmd: Literal["get_loose_ends"]
    agent: str = "*"


class OpCancelLooseEndReq(Req[Cancelled]):
    cmd: Literal["cancel_loose_end"]
    kind: LooseEndKind
    row_id: RowId


class OpQuestionsReq(Req[list[Question]]):
    cmd: Literal["questions"]
    open_only: bool = True


class OpAnswerReq(Req[Answered]):
    cmd: Literal["answer_question"]
    question_id: RowId
    answer: str


class OpSpawnReq(Req[SpawnResult]):
    cmd: Literal["spawn"]
    name: str
    config: AgentConfig = Field(default_factory=AgentConfig)
    parent: str | None = None
    # The operator's pin: run only on this agent host, waiting for it when it is away.
    host: str | None = Field(default=None, min_length=1, max_length=64)


class OpStatusReq(Req[HiveStatus]):
    cmd: Literal["status"]


class OpMessagesReq(Req[Mailbox]):
    """An agent's inbox and outbox, for the operator."""

    cmd: Literal["messages"]
    agent: str
    limit: int = Field(default=50, ge=1, le=1000)


class OpApprovalsReq(Req[list[ApprovalView]]):
    cmd: Literal["approvals"]
    pending_only: bool = True


class OpApprovalShowReq(Req[ApprovalDetail]):
    cmd: Literal["approval_show"]
    approval_id: RowId


class OpResolveReq(Req[ApprovalOutcome]):
    cmd: Literal["approve", "deny"]
    approval_id: RowId
    reason: str = ""
    # Approving a spawn (``init_config``): the agent host the new agent is pinned to
    # (None: placed automatically). Refused for any other approval, and for a host that
    # is unknown or revoked, before anything is created.
    host: str | None = None


class OpLifecycleReq(Req[LifecycleResult]):
    """The operator's kill/start/restart/update/destroy of any agent."""

    cmd: Literal["agent_kill", "agent_start", "agent_restart", "agent_update", "agent_destroy"]
    agent: str


class OpLogsReq(Req[LogTail]):
    """The last ``lines`` of an agent's log; with ``after`` (a previous answer's
    ``cursor``), the lines written since, waiting up to ``wait`` seconds for one."""

    cmd: Literal["logs"]
    agent: str
    lines: int = Field(default=100, ge=1, le=5000)
    after: str | None = Field(default=None, max_length=300)
    wait: float = Field(default=0.0, ge=0.0, le=25.0)


class OpAgentSnapshotReq(Req[AgentSnapshot]):
    """``agent``'s turn state (and Matrix account) from the host that holds it, over
    that host's link: the host may be another machine, so ``hivectl`` never reads it."""

    cmd: Literal["agent_snapshot"]
    agent: str


class OpCompactReq(Req[CompactQueued]):
    cmd: Literal["compact"]
    agent: str


class OpPermsSetReq(Req[ApprovalRequested]):
    """Propose new tool groups/capabilities for an agent (an approval to apply)."""

    cmd: Literal["perms_set"]
    agent: str
    tool_groups: list[str]
    capabilities: list[str] = Field(default_factory=list)


class OpConfigReq(Req[AgentConfigView]):
    cmd: Literal["agent_config"]
    agent: str


class OpAgentForgeReq(Req[ForgeView]):
    """An agent's forge user and repositories, for the operator."""

    cmd: Literal["agent_forge"]
    agent: str


HostLinkState = Literal["connected", "disconnected", "expired", "revoked", "never"]


class HostView(_Out):
    """One row of ``hivectl hosts list``: an agent host's credential, link and lease.

    ``link``: connected; disconnected (its connection dropped but its lease still
    holds its agents); expired (lease gone: its agents are ``lost``); revoked; never
    connected. A local host (``hivectl up``'s, on the unix socket) has no credential
    row: ``remote`` is false and ``created_at`` is when it registered.
    """

    name: str
    created_at: float
    rotated_at: float | None
    revoked: bool
    last_seen_at: float | None
    connected: bool
    agents: list[str]
    remote: bool = True
    link: HostLinkState = "never"
    epoch: int = 0
    last_heartbeat_at: float | None = None
    lease_expires_at: float | None = None
    running_turns: int = 0
    capacity: HostCapacity | None = None
    lost_agents: list[str] = []
    # When its credential stops being accepted (None: never); past it, ``link`` is
    # refused at the handshake and a live link is cut at its next heartbeat.
    credential_expires_at: float | None = None


class HostCredential(_Out):
    """The credential ``hosts add``/``hosts rotate`` print once (only its hash is kept)."""

    name: str
    credential: str
    expires_at: float | None = None


class OpHostsListReq(Req[list[HostView]]):
    cmd: Literal["hosts_list"]


class OpHostsAddReq(Req[HostCredential]):
    cmd: Literal["hosts_add"]
    name: str = Field(min_length=1, max_length=64)
    # When the credential stops being accepted (seconds since the epoch; None: never).
    expires_at: float | None = None


class OpHostsRotateReq(Req[HostCredential]):
    """A new credential (the old one is refused, its link cut), good until ``expires_at``
    (None: for ever, whatever the old one's expiry was)."""

    cmd: Literal["hosts_rotate"]
    name: str
    expires_at: float | None = None


class OpHostsRevokeReq(Req[HostView]):
    """Refuse the host's credential from now on, and cut its live link at once."""

    cmd: Literal["hosts_revoke"]
    name: str


HostRequest = Annotated[
    OpSendReq
    | OpInboxReq
    | OpOutboxReq
    | OpAckReq
    | OpAgentsReq
    | OpSetParentReq
    | OpTopologyReq
    | OpLooseEndsReq
    | OpCancelLooseEndReq
    | OpQuestionsReq
    | OpAnswerReq
    | OpSpawnReq
    | OpStatusReq
    | OpMessagesReq
    | OpApprovalsReq
    | OpApprovalShowReq
    | OpResolveReq
    | OpLifecycleReq
    | OpAgentMoveReq
    | OpLogsReq
    | OpAgentSnapshotReq
    | OpCompactReq
    | OpPermsSetReq
    | OpConfigReq
    | OpAgentForgeReq
    | OpHostsListReq
    | OpHostsAddReq
    | OpHostsRotateReq
    | OpHostsRevokeReq
    | OpBudgetReq
    | OpBudgetSetReq
    | OpSpendReq
    | OpSpendSeriesReq,
    Field(discriminator="cmd"),
]
