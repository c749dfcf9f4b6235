"""The operator socket (``hivectl``, the dashboard): its union, ``HostRequest``, and the
requests about the hive and its agents.

The operator's other requests live with their concept and are listed in the
union here: mail and questions (``mail``), approvals (``approvals``), agent
hosts (``agenthosts``), moves, the activity feed, steering, budgets, turns.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue

from hyperhive.config import AgentConfig
from hyperhive.protocol.agenthosts import (
    OpHostsAddReq,
    OpHostsListReq,
    OpHostsRevokeReq,
    OpHostsRotateReq,
)
from hyperhive.protocol.approvals import (
    OpApprovalShowReq,
    OpApprovalsReq,
    OpPermsSetReq,
    OpResolveReq,
)
from hyperhive.protocol.base import (
    Cancelled,
    CompactQueued,
    LifecycleResult,
    LogTail,
    LooseEnd,
    LooseEndKind,
    Req,
    RowId,
    TurnStateName,
    _Out,
)
from hyperhive.protocol.budget import OpBudgetReq, OpBudgetSetReq, OpSpendReq, OpSpendSeriesReq
from hyperhive.protocol.follow import OpActivityReq, OpAwaitReplyReq
from hyperhive.protocol.hostreads import AgentSnapshot
from hyperhive.protocol.link import Versions
from hyperhive.protocol.mail import (
    OpAckReq,
    OpAnswerReq,
    OpInboxReq,
    OpMessagesReq,
    OpOutboxReq,
    OpQuestionsReq,
    OpSendReq,
)
from hyperhive.protocol.move import OpAgentMoveReq, OpMoveProgressReq
from hyperhive.protocol.steer import OpInterruptReq
from hyperhive.protocol.turns import OpTurnShowReq, OpTurnsListReq, OpTurnsSearchReq

__all__ = [
    "AgentConfigView",
    "AgentView",
    "ForgeView",
    "HiveStatus",
    "HostRequest",
    "LastSnapshot",
    "OpAgentForgeReq",
    "OpAgentSnapshotReq",
    "OpAgentsReq",
    "OpCancelLooseEndReq",
    "OpCompactReq",
    "OpConfigReq",
    "OpLastSnapshotReq",
    "OpLifecycleReq",
    "OpLogsReq",
    "OpLooseEndsReq",
    "OpSetParentReq",
    "OpSpawnReq",
    "OpStatusReq",
    "OpTopologyReq",
    "ParentSet",
    "SpawnResult",
    "WaitingSlot",
]

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
    # False once the operator stopped it (``agents kill``): it stays down until started.
    desired_running: bool = True
    # The hyperhive and claude it started on (None: not recorded yet), and, once its host
    # runs others (upgraded under it), what changed: a restart brings it up to date.
    versions: Versions | None = None
    needs_update: str | None = None


class ParentSet(_Out):
    changed: bool
    topology: dict[str, str | None]


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


# ---- requests --------------------------------------------------------------


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


class OpSpawnReq(Req[SpawnResult]):
    cmd: Literal["spawn"]
    name: str
    config: AgentConfig = Field(default_factory=AgentConfig)
    parent: str | None = None
    # The operator's pin: run only on this agent host, waiting for it when it is away.
    host: str | None = Field(default=None, min_length=1, max_length=64)


class OpStatusReq(Req[HiveStatus]):
    cmd: Literal["status"]


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


class OpConfigReq(Req[AgentConfigView]):
    cmd: Literal["agent_config"]
    agent: str


class LastSnapshot(_Out):
    """An agent's last snapshot in the store (``taken_at`` null: none kept), what a
    replacement on another host would restore."""

    host: str | None = None  # the host that sent it
    taken_at: float | None = None
    size: int = 0  # sent and stored (gzip)
    raw_bytes: int = 0  # its files, uncompressed
    files: int = 0


class OpLastSnapshotReq(Req[LastSnapshot]):
    """An agent's last snapshot, for the operator (``agents show``)."""

    cmd: Literal["agent_last_snapshot"]
    agent: str


class OpAgentForgeReq(Req[ForgeView]):
    """An agent's forge user and repositories, for the operator."""

    cmd: Literal["agent_forge"]
    agent: str


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
    | OpMoveProgressReq
    | OpAwaitReplyReq
    | OpActivityReq
    | OpLogsReq
    | OpAgentSnapshotReq
    | OpCompactReq
    | OpInterruptReq
    | OpPermsSetReq
    | OpConfigReq
    | OpAgentForgeReq
    | OpLastSnapshotReq
    | OpHostsListReq
    | OpHostsAddReq
    | OpHostsRotateReq
    | OpHostsRevokeReq
    | OpBudgetReq
    | OpBudgetSetReq
    | OpSpendReq
    | OpSpendSeriesReq
    | OpTurnsListReq
    | OpTurnShowReq
    | OpTurnsSearchReq,
    Field(discriminator="cmd"),
]
