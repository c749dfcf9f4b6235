"""What an agent may ask of the coordinator, on its own socket.

``AgentApi(name, …parts)`` is bound to one agent's listener: ``name`` is who
is asking, whatever the request says. Commands that are MCP tools are gated
here by the agent's tool groups (server-side; ``--allowedTools`` is only a
convenience) — by the tool's one declaration, the same the MCP surface
reads — and every cross-agent action is checked against the topology.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Any

from hyperhive import __version__, topology
from hyperhive.config import AgentConfig
from hyperhive.core.agent_state import AgentState
from hyperhive.core.approvals import Approvals
from hyperhive.core.broker import Broker
from hyperhive.core.budgets import Budgets
from hyperhive.core.hostlink import HostLink
from hyperhive.core.identities import AgentIdentities
from hyperhive.core.lifecycle import Lifecycle
from hyperhive.core.logs import LogTails
from hyperhive.core.loose_ends import LooseEnds, owner_of
from hyperhive.core.notify import EventBus
from hyperhive.core.registry import AgentRegistry
from hyperhive.core.scheduler import Scheduler
from hyperhive.dispatch import Dispatcher
from hyperhive.errors import (
    Conflict,
    InvalidName,
    InvalidRequest,
    LimitExceeded,
    NotFound,
    PermissionDenied,
    ToolGroupDenied,
)
from hyperhive.matrix.config import MatrixConfig
from hyperhive.names import OPERATOR, PARENT_SENTINEL, RESERVED_NAMES, validate_task_name
from hyperhive.permissions import HYPERHIVE_SERVER, Capability, ToolGroup, declaration
from hyperhive.protocol import (
    Acked,
    AckUntilReq,
    ActivityReported,
    AgentMeta,
    AgentRequest,
    ApprovalRequested,
    Asked,
    AskOperatorReq,
    Attached,
    AttachReq,
    Cancelled,
    CancelLooseEndReq,
    CancelScheduleReq,
    Cleared,
    CompactQueued,
    CompactReq,
    Created,
    CreateRepoReq,
    FenceReq,
    ForgeTokenIssued,
    ForgeTokenReq,
    GetAgentMetaReq,
    GetHostJournalReq,
    GetLogsReq,
    GetLooseEndsReq,
    HostJournal,
    LifecycleReq,
    LifecycleResult,
    ListSchedulesReq,
    LogTail,
    LooseEnd,
    MatrixAccount,
    MatrixAccountReq,
    MatrixSignedIn,
    Message,
    ModelSpend,
    RecordSpendReq,
    RecvReq,
    Reminded,
    RemindReq,
    RepoCreated,
    ReportActivityReq,
    RequestApplyCommitReq,
    RequestInitConfigReq,
    Schedule,
    SchedulePromptReq,
    SendReq,
    Sent,
    SetStatusReq,
    SpendRecorded,
    StatusSet,
    TodoClearReq,
    TodoUpsertReq,
    TurnEnded,
    TurnEndReq,
    WaitReq,
    WaitResult,
    WakeReq,
)
from hyperhive.protocol.agent import REMIND_MAX_BYTES
from hyperhive.topology import TopologyStore

__all__ = ["AGENT_TABLE", "COMPACT_THRESHOLD", "STATUS_MAX", "AgentApi", "gate"]

COMPACT_THRESHOLD = 0.66
STATUS_MAX = 200

AGENT_TABLE: Dispatcher[AgentApi] = Dispatcher("agent socket", AgentRequest)
on = AGENT_TABLE.on


def gate(cmd: str, agent: str, config: AgentConfig) -> None:
    """Refuse ``cmd`` when it is a hyperhive tool ``config`` does not grant ``agent``.

    The tool's own declaration decides, as on the MCP surface; a command that
    is no tool (the harness's, a producer's) passes.
    """
    tool = declaration(HYPERHIVE_SERVER, cmd)
    if tool is None:
        return
    why = tool.refusal(agent, config.tool_groups, config.capabilities)
    if why is not None:
        raise (ToolGroupDenied if tool.group is not None else PermissionDenied)(why)


class AgentApi:
    """The handlers behind ``run/agents/<name>.sock``, bound to the agent ``name``."""

    def __init__(
        self,
        name: str,
        *,
        registry: AgentRegistry,
        topology_store: TopologyStore,
        broker: Broker,
        loose_ends: LooseEnds,
        scheduler: Scheduler,
        agent_state: AgentState,
        approvals: Approvals,
        lifecycle: Lifecycle,
        logs: LogTails,
        hostlink: HostLink,
        bus: EventBus,
        hive_name: str,
        budgets: Budgets,
        matrix: MatrixConfig | None = None,
        identities: AgentIdentities | None = None,
    ) -> None:
        self.name = name
        self.hive_name = hive_name
        self.registry = registry
        self.topology_store = topology_store
        self.broker = broker
        self.loose_ends = loose_ends
        self.scheduler = scheduler
        self.agent_state = agent_state
        self.approvals = approvals
        self.lifecycle = lifecycle
        self.logs = logs
        self.hostlink = hostlink
        self.bus = bus
        self.budgets = budgets
        self.matrix = matrix
        self.identities = identities or AgentIdentities(None, matrix)

    def __call__(self, req: Any) -> Awaitable[Any]:
        """The handler's coroutine for ``req``, once the gate lets it through."""
        gate(req.cmd, self.name, self.registry.config(self.name))
        return AGENT_TABLE(self, req)

    def _topology(self) -> topology.Topology:
        return self.topology_store.view()

    def _resolve_recipient(self, to: str) -> str:
        """``<parent>`` → the parent (``operator`` for a root); unknown names refused."""
        if to == PARENT_SENTINEL:
            return self._topology().get(self.name) or OPERATOR
        if to == OPERATOR:
            return to
        if not self.registry.exists(to):
            raise NotFound(
                f"unknown recipient {to!r}: no such agent (messages are never dropped "
                "silently); use get_agent_meta or ask your parent for the right name"
            )
        return to

    # ---- messaging ---------------------------------------------------------

    @on(SendReq)
    async def _send(self, req: SendReq) -> Sent:
        recipient = self._resolve_recipient(req.to)
        cfg = self.registry.config(self.name)
        decision = topology.check_route(
            self._topology(), self.name, recipient, cfg.allowed_recipients, cfg.extra_recipients
        )
        if not decision.allowed:
            raise topology.refuse_route(self.name, recipient, decision)
        msg_id = await self.broker.send(self.name, recipient, req.body, req.in_reply_to)
        return Sent(id=msg_id, to=recipient)

    @on(RecvReq)
    async def _recv(self, req: RecvReq) -> list[Message]:
        return list(await self.broker.recv(self.name, req.max))

    @on(AckUntilReq)
    async def _ack_until(self, req: AckUntilReq) -> Acked:
        return Acked(acked=await self.broker.ack_until(self.name, req.up_to))

    @on(AskOperatorReq)
    async def _ask_operator(self, req: AskOperatorReq) -> Asked:
        self.broker.check_body(req.question)
        qid, mid = await self.loose_ends.ask_operator(self.name, req.question)
        self.bus.emit("question", question_id=qid, state="open", asker=self.name)
        await self.agent_state.activity.question_asked(self.name, qid, req.question)
        return Asked(question_id=qid, message_id=mid)

    # ---- harness -----------------------------------------------------------

    @on(WaitReq)
    async def _wait(self, req: WaitReq) -> WaitResult:
        return await self.broker.wait(
            self.name, req.timeout, req.todo_version, hold=self._over_budget
        )

    async def _over_budget(self) -> bool:
        return await self.budgets.held(self.name) is not None

    @on(AttachReq)
    async def _attach(self, req: AttachReq) -> Attached:
        incarnation = await self.broker.attach(self.name)
        return Attached(incarnation=incarnation, agent=self.name)

    @on(FenceReq)
    async def _fence(self, req: FenceReq) -> None:
        await self.broker.fence(self.name)

    @on(TurnEndReq)
    async def _turn_end(self, req: TurnEndReq) -> TurnEnded:
        # Spend first, keyed by the run: a turn_end resent after a restart counts once.
        spent = None
        if req.spend is not None:
            spent, _ = await self.budgets.record(self.name, req.spend)
        # The ack commits with the outcome: a clean turn's mail is never redelivered
        # once turn_end answers.
        return await self.agent_state.turn_end(self.name, req, spent)

    @on(RecordSpendReq)
    async def _record_spend(self, req: RecordSpendReq) -> SpendRecorded:
        # A subagent runs in this agent's sandbox and reports through its socket:
        # its spend counts to this agent.
        entry, new = await self.budgets.record(self.name, req.spend)
        return SpendRecorded(recorded=new, spend=ModelSpend.of(entry.figures()))

    # ---- in-sandbox producers ----------------------------------------------

    @on(WakeReq)
    async def _wake(self, req: WakeReq) -> Created:
        label = req.sender
        try:
            validate_task_name(label)
        except InvalidName as exc:
            raise InvalidRequest(f"wake label: {exc.message}") from exc
        if label in RESERVED_NAMES or self.registry.exists(label):
            raise PermissionDenied(
                f"wake label {label!r} is an agent or reserved name; a producer names itself "
                "(e.g. 'matrix', 'forge'), never someone else"
            )
        if req.key is not None:
            return Created(id=await self.broker.send_keyed(label, self.name, req.body, req.key))
        return Created(id=await self.broker.send(label, self.name, req.body))

    @on(TodoUpsertReq)
    async def _todo_upsert(self, req: TodoUpsertReq) -> Created:
        self.broker.check_body(req.body)
        todo = await self.loose_ends.todo_upsert(
            self.name, req.subsystem, req.key, req.body, wake=req.wake
        )
        return Created(id=todo)

    @on(TodoClearReq)
    async def _todo_clear(self, req: TodoClearReq) -> Cleared:
        return Cleared(cleared=await self.loose_ends.todo_clear(self.name, req.subsystem, req.key))

    @on(ReportActivityReq)
    async def _report_activity(self, req: ReportActivityReq) -> ActivityReported:
        # The host runs this agent's tasks; what it reports lands on this socket's agent.
        what = "bash task" if req.kind == "bash" else "subagent"
        end = ""
        if req.phase != "started":
            end = f" ({req.status or 'done'}" + (
                f", exit {req.exit_code})" if req.exit_code is not None else ")"
            )
        detail: dict[str, object] = {"ref": req.ref, "phase": req.phase}
        if req.status is not None:
            detail["status"] = req.status
        if req.exit_code is not None:
            detail["exit_code"] = req.exit_code
        await self.agent_state.activity.record(
            req.kind,
            self.name,
            f"{self.name}: {what} {req.ref} {req.phase}{end}: {req.summary}",
            detail=detail,
            key=f"{req.kind}:{self.name}:{req.event_id}",
        )
        return ActivityReported(recorded=True)

    @on(CompactReq)
    async def _compact(self, req: CompactReq) -> CompactQueued:
        return await self.agent_state.request_compact(self.name, COMPACT_THRESHOLD)

    # ---- inbox -------------------------------------------------------------

    @on(RemindReq)
    async def _remind(self, req: RemindReq) -> Reminded:
        size = len(req.message.encode("utf-8"))
        if size > REMIND_MAX_BYTES:
            raise LimitExceeded(
                f"a reminder is at most {REMIND_MAX_BYTES} bytes ({REMIND_MAX_BYTES // 1024} KiB) "
                f"of UTF-8; this one is {size}: keep the detail in a file under your state "
                "directory and remind yourself of its path"
            )
        now = time.time()
        due = now + req.delay_seconds if req.delay_seconds is not None else req.at_unix_timestamp
        assert due is not None
        if due - now > 5 * 365 * 86400:
            raise InvalidRequest(
                "a reminder more than five years out is refused; pick a nearer time"
            )
        rid = await self.loose_ends.remind(self.name, req.message, max(due, now))
        self.scheduler.poke()
        return Reminded(id=rid, due_at=due)

    @on(GetLooseEndsReq)
    async def _get_loose_ends(self, req: GetLooseEndsReq) -> list[LooseEnd]:
        target = req.agent or self.name
        if target == "*":
            raise PermissionDenied(
                "the hive-wide '*' query is only for the operator; pass an agent name"
            )
        if target != self.name:
            self.registry.require(target)
            topo = self._topology()
            if not topology.is_descendant_of(topo, target, self.name):
                caps = self.registry.config(self.name).capabilities
                if Capability.QUERY_AGENT_STATE not in caps:
                    raise PermissionDenied(
                        f"{target} is not your descendant; reading its loose ends needs the "
                        "query_agent_state capability"
                    )
        return list(await self.loose_ends.list_for([target]))

    @on(CancelLooseEndReq)
    async def _cancel_loose_end(self, req: CancelLooseEndReq) -> Cancelled:
        topo = self._topology()
        if req.kind == "approval" and topo.get(self.name) is not None:
            raise PermissionDenied("only a root agent may cancel an approval (not a root)")
        row = await self.loose_ends.row(req.kind, req.row_id)
        if row is None:
            raise NotFound(f"no {req.kind} #{req.row_id}")
        owner = owner_of(req.kind, row)
        if owner != self.name:
            moderates = req.kind in ("reminder", "question") and topology.is_descendant_of(
                topo, owner, self.name
            )
            if not moderates:
                raise PermissionDenied(
                    f"{req.kind} #{req.row_id} belongs to {owner}; you may cancel your own rows "
                    "and your descendants' reminders and questions (not a descendant)"
                )
        done = await self.loose_ends.cancel(req.kind, req.row_id)
        if done and req.kind == "approval":
            await self.agent_state.activity.approval_cancelled(req.row_id, self.name)
        if req.kind == "reminder":
            self.scheduler.poke()
        if done and req.kind in ("approval", "question"):  # the operator's waiting count
            self.bus.emit(req.kind, **{f"{req.kind}_id": req.row_id}, state="cancelled")
        return Cancelled(cancelled=done)

    # ---- meta --------------------------------------------------------------

    @on(SetStatusReq)
    async def _set_status(self, req: SetStatusReq) -> StatusSet:
        text = req.text.strip()
        if "\n" in text or "\r" in text:
            raise InvalidRequest("status must be a single line")
        if len(text) > STATUS_MAX:
            raise LimitExceeded(f"status is {len(text)} characters; the limit is {STATUS_MAX}")
        await self.agent_state.set_status(self.name, text)
        # Before the answer: the agent's next get_agent_meta must not see the old status.
        await self.hostlink.meta_changed(self.name)
        return StatusSet(status_text=text)

    @on(GetAgentMetaReq)
    async def _get_agent_meta(self, req: GetAgentMetaReq) -> AgentMeta:
        name = req.name or self.name
        self.registry.require(name)
        row = await self.agent_state.row(name)
        return AgentMeta(
            name=name,
            hive_name=self.hive_name,
            hyperhive_rev=__version__,
            running=self.hostlink.running(name),
            status_text=row.status_text,
            status_set_at=row.status_set_at,
            parent=self._topology().get(name),
            matrix_accounts=self._matrix_accounts(name),
        )

    def _matrix_accounts(self, name: str) -> list[MatrixAccount] | None:
        """``name``'s Matrix identity, if its config enables one and the hive has a homeserver."""
        config = self.registry.configs.get(name)
        if self.matrix is None or config is None or not config.matrix.enabled:
            return None
        return [
            MatrixAccount(
                name=name, user_id=self.matrix.user_id(name), homeserver=self.matrix.homeserver
            )
        ]

    # ---- its forge and Matrix identities (issue #14: admin credentials stay here) ----------

    def _require_forge(self) -> None:
        # Checked against the applied config: an agent whose group was taken away (and
        # its identity revoked) cannot mint itself a new one.
        if ToolGroup.FORGE not in self.registry.config(self.name).tool_groups:
            raise ToolGroupDenied(
                f"{self.name} has no 'forge' tool group, so no forge identity; the operator "
                "can grant it in the permissions tab (hivectl perms set)"
            )

    @on(ForgeTokenReq)
    async def _forge_token(self, req: ForgeTokenReq) -> ForgeTokenIssued:
        self._require_forge()
        return await self.identities.forge_token(self.name)

    @on(CreateRepoReq)
    async def _create_repo(self, req: CreateRepoReq) -> RepoCreated:
        self._require_forge()
        return await self.identities.create_repo(self.name, req.name, req.description, req.private)

    @on(MatrixAccountReq)
    async def _matrix_account(self, req: MatrixAccountReq) -> MatrixSignedIn:
        if not self.registry.config(self.name).matrix.enabled:
            raise PermissionDenied(
                f"{self.name} has no Matrix identity ([matrix] enabled = false in its "
                "applied agent.toml)"
            )
        return await self.identities.matrix_account(self.name)

    # ---- scheduling --------------------------------------------------------

    def _self_or_descendant(self, target: str) -> None:
        self.registry.require(target)
        if target != self.name and not topology.is_descendant_of(
            self._topology(), target, self.name
        ):
            raise PermissionDenied(f"{target} is not you or your descendant (not a descendant)")

    @on(SchedulePromptReq)
    async def _schedule_prompt(self, req: SchedulePromptReq) -> Created:
        self._self_or_descendant(req.target)
        self.broker.check_body(req.prompt)
        sid = await self.loose_ends.schedule(
            self.name, req.target, req.prompt, req.every_seconds, req.cron
        )
        self.scheduler.poke()
        return Created(id=sid)

    @on(ListSchedulesReq)
    async def _list_schedules(self, req: ListSchedulesReq) -> list[Schedule]:
        scope = [self.name, *topology.descendants(self._topology(), self.name)]
        return [Schedule.model_validate(r) for r in await self.loose_ends.schedules_for(scope)]

    # ---- lifecycle (target table of spec 004) ------------------------------------------

    @on(RequestInitConfigReq)
    async def _request_init_config(self, req: RequestInitConfigReq) -> ApprovalRequested:
        return await self.approvals.request_init_config(self.name, req.name, req.config)

    @on(RequestApplyCommitReq)
    async def _request_apply_commit(self, req: RequestApplyCommitReq) -> ApprovalRequested:
        return await self.approvals.request_apply_commit(self.name, req.agent, req.commit)

    @on(LifecycleReq)
    async def _lifecycle(self, req: LifecycleReq) -> LifecycleResult:
        return await self.lifecycle.act(self.name, req.cmd, req.agent)

    @on(GetLogsReq)
    async def _get_logs(self, req: GetLogsReq) -> LogTail:
        self.lifecycle.check_manage(self.name, "get_logs", req.agent)
        return await self.logs.agent(req.agent, req.lines)

    @on(GetHostJournalReq)
    async def _get_host_journal(self, req: GetHostJournalReq) -> HostJournal:
        return await self.logs.host_journal(self.name, req.lines)

    @on(CancelScheduleReq)
    async def _cancel_schedule(self, req: CancelScheduleReq) -> Cancelled:
        row = await self.loose_ends.schedule_row(req.schedule_id)
        if row is None:
            raise NotFound(f"no schedule #{req.schedule_id}")
        owner = row.owner
        if owner != self.name and not topology.is_descendant_of(self._topology(), owner, self.name):
            # Moderation runs downward only: a target cannot cancel what its parent set.
            raise PermissionDenied(
                f"schedule #{req.schedule_id} was set by {owner}; only its owner or the "
                "owner's ancestors may cancel it (not a descendant)"
            )
        if row.cancelled_at is not None:
            raise Conflict(f"schedule #{req.schedule_id} is already cancelled")
        return Cancelled(cancelled=await self.loose_ends.cancel("schedule", req.schedule_id))


AGENT_TABLE.seal()
