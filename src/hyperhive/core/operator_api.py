"""What the operator may ask, on ``run/host.sock`` (``hivectl``, dashboard).

The operator is trusted with the whole hive, but requests are still typed
and every refusal of the shared rules (unknown names, cycles) reaches the
operator verbatim.
"""

from __future__ import annotations

import os
from typing import Any

from hyperhive import topology
from hyperhive.budgets import describe
from hyperhive.config import HivePaths
from hyperhive.core.agent_state import AgentState
from hyperhive.core.approvals import Approvals
from hyperhive.core.broker import Broker
from hyperhive.core.budgets import Budgets
from hyperhive.core.host_admin import HostAdmin
from hyperhive.core.hostlink import HostLink
from hyperhive.core.lifecycle import Lifecycle
from hyperhive.core.logs import LogTails
from hyperhive.core.loose_ends import LooseEnds
from hyperhive.core.mirror import MetaMirror
from hyperhive.core.moves import Mover
from hyperhive.core.notify import EventBus
from hyperhive.core.placement import Placement
from hyperhive.core.registry import AgentRegistry
from hyperhive.core.scheduler import Scheduler
from hyperhive.dispatch import Dispatcher
from hyperhive.effective import turn_tool_args
from hyperhive.errors import InvalidRequest, NotFound
from hyperhive.forge.config import ForgeConfig
from hyperhive.forge.view import forge_view
from hyperhive.names import OPERATOR, validate_agent_name
from hyperhive.permissions import Capability, ToolGroup
from hyperhive.protocol import (
    Acked,
    AgentConfigView,
    AgentView,
    Answered,
    ApprovalDetail,
    ApprovalOutcome,
    ApprovalRequested,
    ApprovalView,
    BudgetView,
    Cancelled,
    CompactQueued,
    ForgeView,
    HiveStatus,
    HostCredential,
    HostRequest,
    HostView,
    LifecycleResult,
    LogTail,
    LooseEnd,
    Mailbox,
    Message,
    Moved,
    OpAckReq,
    OpAgentForgeReq,
    OpAgentMoveReq,
    OpAgentSnapshotReq,
    OpAgentsReq,
    OpAnswerReq,
    OpApprovalShowReq,
    OpApprovalsReq,
    OpBudgetReq,
    OpBudgetSetReq,
    OpCancelLooseEndReq,
    OpCompactReq,
    OpConfigReq,
    OpHostsAddReq,
    OpHostsListReq,
    OpHostsRevokeReq,
    OpHostsRotateReq,
    OpInboxReq,
    OpLifecycleReq,
    OpLogsReq,
    OpLooseEndsReq,
    OpMessagesReq,
    OpOutboxReq,
    OpPermsSetReq,
    OpQuestionsReq,
    OpResolveReq,
    OpSendReq,
    OpSetParentReq,
    OpSpawnReq,
    OpSpendReq,
    OpSpendSeriesReq,
    OpStatusReq,
    OpTopologyReq,
    ParentSet,
    Question,
    Sent,
    SpawnResult,
    SpendReport,
    SpendSeries,
    WaitingSlot,
)
from hyperhive.protocol.hostreads import AgentSnapshot
from hyperhive.store.rows import AgentState as AgentStateRow
from hyperhive.topology import TopologyStore

__all__ = ["OPERATOR_TABLE", "OperatorApi"]

OPERATOR_TABLE: Dispatcher[OperatorApi] = Dispatcher("operator socket", HostRequest)
on = OPERATOR_TABLE.on


class OperatorApi:
    def __init__(
        self,
        *,
        paths: HivePaths,
        schema_version: int,
        registry: AgentRegistry,
        topology_store: TopologyStore,
        mirror: MetaMirror,
        broker: Broker,
        loose_ends: LooseEnds,
        scheduler: Scheduler,
        agent_state: AgentState,
        approvals: Approvals,
        lifecycle: Lifecycle,
        placement: Placement,
        mover: Mover,
        logs: LogTails,
        hostlink: HostLink,
        bus: EventBus,
        forge: ForgeConfig | None,
        host_admin: HostAdmin,
        budgets: Budgets,
    ) -> None:
        self.paths = paths
        self.schema_version = schema_version
        self.registry = registry
        self.topology_store = topology_store
        self.mirror = mirror
        self.broker = broker
        self.loose_ends = loose_ends
        self.scheduler = scheduler
        self.agent_state = agent_state
        self.mover = mover
        self.approvals = approvals
        self.lifecycle = lifecycle
        self.placement = placement
        self.logs = logs
        self.hostlink = hostlink
        self.bus = bus
        self.forge = forge
        self.host_admin = host_admin
        self.budgets = budgets
        self.pid = os.getpid()

    async def __call__(self, req: Any) -> Any:
        return await OPERATOR_TABLE(self, req)

    async def agents_view(self) -> list[AgentView]:
        topo = self.topology_store.read_cached()
        rows = await self.agent_state.all_rows()
        unread = await self.agent_state.unread_by_operator()
        assigned = {a.agent: a for a in await self.placement.assignments.all()}
        out = []
        for name in self.registry.known():
            row = rows.get(name) or AgentStateRow(name=name)
            turn = self.hostlink.turns.get(name)
            held = await self.budgets.held(name)
            where = assigned.get(name)
            out.append(
                AgentView(
                    name=name,
                    parent=topo.get(name),
                    running=self.hostlink.running(name),
                    host=self.hostlink.host_of(name),
                    turn_state=turn.state if turn else "stopped",
                    turn_state_since=turn.since if turn else None,
                    status_text=row.status_text,
                    needs_login=row.needs_login,
                    over_budget=describe(held) if held else None,
                    broken=self.registry.broken.get(name),
                    launch_problem=turn.launch_problem if turn else None,
                    crashed=self.placement.crash_reasons.get(name),
                    unread_operator_messages=unread.get(name, 0),
                    last_context_usage=row.last_context_usage,
                    config_warnings=self.registry.warnings(name),
                    assigned_host=where.host if where else None,
                    pinned=where.pinned if where else False,
                    move_to=where.move_to if where else None,
                    move_phase=where.move_phase if where else None,
                    lost_on=self.hostlink.lost.get(name),
                )
            )
        return out

    @on(OpSendReq)
    async def _send(self, req: OpSendReq) -> Sent:
        recipient = req.to
        if recipient != OPERATOR:
            self.registry.require(recipient)
        msg_id = await self.broker.send(OPERATOR, recipient, req.body, req.in_reply_to)
        return Sent(id=msg_id, to=recipient)

    @on(OpInboxReq)
    async def _inbox(self, req: OpInboxReq) -> list[Message]:
        return list(await self.broker.inbox(OPERATOR, req.limit, req.unread_only))

    @on(OpOutboxReq)
    async def _outbox(self, req: OpOutboxReq) -> list[Message]:
        return list(await self.broker.outbox(OPERATOR, req.limit))

    @on(OpAckReq)
    async def _ack_until(self, req: OpAckReq) -> Acked:
        return Acked(acked=await self.broker.ack_until(OPERATOR, req.up_to))

    @on(OpMessagesReq)
    async def _messages(self, req: OpMessagesReq) -> Mailbox:
        self.registry.require(req.agent)
        return Mailbox(
            inbox=await self.broker.inbox(req.agent, req.limit),
            outbox=await self.broker.outbox(req.agent, req.limit),
        )

    @on(OpBudgetReq)
    async def _budget(self, req: OpBudgetReq) -> BudgetView:
        return await self.budgets.view()

    @on(OpBudgetSetReq)
    async def _budget_set(self, req: OpBudgetSetReq) -> BudgetView:
        return await self.budgets.set_limits(req.scope, req.limits, req.reset)

    @on(OpSpendReq)
    async def _spend(self, req: OpSpendReq) -> SpendReport:
        return await self.budgets.report()

    @on(OpSpendSeriesReq)
    async def _spend_series(self, req: OpSpendSeriesReq) -> SpendSeries:
        return await self.budgets.series(req.days)

    @on(OpAgentsReq)
    async def _agents(self, req: OpAgentsReq) -> list[AgentView]:
        return await self.agents_view()

    @on(OpAgentForgeReq)
    async def _agent_forge(self, req: OpAgentForgeReq) -> ForgeView:
        config = self.registry.config(req.agent)
        granted = ToolGroup.FORGE in config.tool_groups
        return await forge_view(self.forge, req.agent, granted)

    @on(OpTopologyReq)
    async def _topology(self, req: OpTopologyReq) -> dict[str, str | None]:
        return self.topology_store.read_cached()

    @on(OpSetParentReq)
    async def _set_parent(self, req: OpSetParentReq) -> ParentSet:
        updated, changed = await self.lifecycle.set_parent(req.child, req.new_parent or None)
        return ParentSet(changed=changed, topology=updated)

    @on(OpLooseEndsReq)
    async def _get_loose_ends(self, req: OpLooseEndsReq) -> list[LooseEnd]:
        if req.agent == "*":
            return list(await self.loose_ends.list_for(None))
        self.registry.require(req.agent)
        return list(await self.loose_ends.list_for([req.agent]))

    @on(OpCancelLooseEndReq)
    async def _cancel_loose_end(self, req: OpCancelLooseEndReq) -> Cancelled:
        if await self.loose_ends.row(req.kind, req.row_id) is None:
            raise NotFound(f"no {req.kind} #{req.row_id}")
        done = await self.loose_ends.cancel(req.kind, req.row_id)
        self.scheduler.poke()
        if done and req.kind in ("approval", "question"):  # the operator's waiting count
            self.bus.emit(req.kind, **{f"{req.kind}_id": req.row_id}, state="cancelled")
        if done and req.kind == "approval":
            await self.agent_state.activity.approval_cancelled(req.row_id, "the operator")
        return Cancelled(cancelled=done)

    @on(OpQuestionsReq)
    async def _questions(self, req: OpQuestionsReq) -> list[Question]:
        return [Question.model_validate(r) for r in await self.loose_ends.questions(req.open_only)]

    @on(OpAnswerReq)
    async def _answer_question(self, req: OpAnswerReq) -> Answered:
        self.broker.check_body(req.answer)
        asker, msg_id = await self.loose_ends.answer_question(req.question_id, req.answer)
        self.bus.emit("question", question_id=req.question_id, state="answered")
        await self.agent_state.activity.question_answered(
            asker, req.question_id, req.answer, msg_id
        )
        return Answered(asker=asker, message_id=msg_id)

    @on(OpSpawnReq)
    async def _spawn(self, req: OpSpawnReq) -> SpawnResult:
        validate_agent_name(req.name)
        if self.registry.exists(req.name):
            raise InvalidRequest(f"an agent named {req.name!r} already exists")
        if req.parent is not None:
            self.registry.require(req.parent)
        await self.lifecycle.create(
            req.name, req.config, req.parent, f"spawn {req.name} (operator)", host=req.host
        )
        return SpawnResult(
            name=req.name, parent=req.parent, running=self.hostlink.running(req.name)
        )

    @on(OpApprovalsReq)
    async def _approvals(self, req: OpApprovalsReq) -> list[ApprovalView]:
        return await self.approvals.list(req.pending_only)

    @on(OpApprovalShowReq)
    async def _approval_show(self, req: OpApprovalShowReq) -> ApprovalDetail:
        return await self.approvals.show(req.approval_id)

    @on(OpResolveReq)
    async def _resolve(self, req: OpResolveReq) -> ApprovalOutcome:
        approve = req.cmd == "approve"
        if not approve and not req.reason.strip():
            raise InvalidRequest("say why: deny needs a reason (--reason), which the asker reads")
        return await self.approvals.resolve(req.approval_id, approve, req.reason, req.host)

    @on(OpLifecycleReq)
    async def _lifecycle(self, req: OpLifecycleReq) -> LifecycleResult:
        return await self.lifecycle.act(None, req.cmd.removeprefix("agent_"), req.agent)

    @on(OpAgentMoveReq)
    async def _move(self, req: OpAgentMoveReq) -> Moved:
        return await self.mover.move(req.agent, req.to)

    @on(OpLogsReq)
    async def _logs(self, req: OpLogsReq) -> LogTail:
        self.registry.require(req.agent)
        return await self.logs.agent(req.agent, req.lines, req.after, req.wait)

    @on(OpAgentSnapshotReq)
    async def _agent_snapshot(self, req: OpAgentSnapshotReq) -> AgentSnapshot:
        self.registry.require(req.agent)
        return await self.hostlink.snapshot(req.agent)

    @on(OpCompactReq)
    async def _compact(self, req: OpCompactReq) -> CompactQueued:
        self.registry.require(req.agent)
        # Ungated: the 66% rule keeps an agent from compacting itself for nothing;
        # the operator decides with more than the last turn's usage to go on.
        return await self.agent_state.request_compact(req.agent, None)

    @on(OpConfigReq)
    async def _agent_config(self, req: OpConfigReq) -> AgentConfigView:
        cfg = self.registry.config(req.agent)
        args = turn_tool_args(cfg)  # exactly what its turns get (bash only with execution)
        return AgentConfigView(
            agent=req.agent,
            config=cfg.model_dump(mode="json"),
            tool_groups=[g.value for g in cfg.tool_groups],
            capabilities=[c.value for c in cfg.capabilities],
            tools_arg=args.tools,
            allowed_tools_arg=args.allowed_tools,
        )

    @on(OpPermsSetReq)
    async def _perms_set(self, req: OpPermsSetReq) -> ApprovalRequested:
        current = self.registry.config(req.agent)
        try:
            groups = [ToolGroup(g.strip().lower()) for g in req.tool_groups if g.strip()]
            caps = [Capability(c.strip().lower()) for c in req.capabilities if c.strip()]
        except ValueError as exc:
            raise InvalidRequest(f"{exc}; known groups: {', '.join(ToolGroup.ALL)}") from exc
        if not groups:
            raise InvalidRequest("an agent needs at least one tool group")
        proposed = current.model_copy(update={"tool_groups": groups, "capabilities": caps})
        return await self.approvals.propose(
            OPERATOR, req.agent, proposed, "permissions: " + ",".join(groups)
        )

    @on(OpStatusReq)
    async def _status(self, req: OpStatusReq) -> HiveStatus:
        topo = self.topology_store.read_cached()
        return HiveStatus(
            home=str(self.paths.home),
            agents=len(self.registry.known()),
            running=sum(self.hostlink.running(a) for a in self.registry.known()),
            hosts=sorted(self.hostlink.hosts),
            claude_slots=self.hostlink.claude_slots(),
            waiting_slot=[
                WaitingSlot(agent=agent, since=since)
                for agent, since in self.hostlink.waiting_for_slots()
            ],
            lost=dict(sorted(self.hostlink.lost.items())),
            roots=topology.roots(topo),
            schema_version=self.schema_version,
            pid=self.pid,
        )

    # ---- remote agent hosts ------------------------------------------------------

    @on(OpHostsListReq)
    async def _hosts_list(self, req: OpHostsListReq) -> list[HostView]:
        return await self.host_admin.list()

    @on(OpHostsAddReq)
    async def _hosts_add(self, req: OpHostsAddReq) -> HostCredential:
        return await self.host_admin.add(req.name, req.expires_at)

    @on(OpHostsRotateReq)
    async def _hosts_rotate(self, req: OpHostsRotateReq) -> HostCredential:
        return await self.host_admin.rotate(req.name, req.expires_at)

    @on(OpHostsRevokeReq)
    async def _hosts_revoke(self, req: OpHostsRevokeReq) -> HostView:
        return await self.host_admin.revoke(req.name)


OPERATOR_TABLE.seal()
