"""What the operator may ask, on ``run/host.sock`` (``hivectl``, dashboard).

The operator is trusted with the whole hive, but requests are still typed
and every refusal of the shared rules (unknown names, cycles) reaches the
operator verbatim.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hyperhive import topology
from hyperhive.core.agent_api import COMPACT_THRESHOLD
from hyperhive.effective import turn_tool_args
from hyperhive.errors import InvalidRequest, NotFound
from hyperhive.forge.view import forge_view
from hyperhive.names import OPERATOR, validate_agent_name
from hyperhive.permissions import Capability, ToolGroup
from hyperhive.protocol import (
    OpAckReq,
    OpAgentForgeReq,
    OpAgentsReq,
    OpAnswerReq,
    OpApprovalShowReq,
    OpApprovalsReq,
    OpCancelLooseEndReq,
    OpCompactReq,
    OpConfigReq,
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
    OpStatusReq,
    OpTopologyReq,
)

if TYPE_CHECKING:
    from hyperhive.core.coordinator import Coordinator

__all__ = ["OperatorApi"]


class OperatorApi:
    def __init__(self, coord: Coordinator) -> None:
        self.c = coord

    async def __call__(self, req: Any) -> Any:
        handler = getattr(self, f"_{req.cmd}")
        return await handler(req)

    async def _send(self, req: OpSendReq) -> dict[str, Any]:
        recipient = req.to
        if recipient != OPERATOR:
            self.c.require_agent(recipient)
        msg_id = await self.c.broker.send(OPERATOR, recipient, req.body, req.in_reply_to)
        return {"id": msg_id, "to": recipient}

    async def _inbox(self, req: OpInboxReq) -> list[Any]:
        return list(await self.c.broker.inbox(OPERATOR, req.limit, req.unread_only))

    async def _outbox(self, req: OpOutboxReq) -> list[Any]:
        return list(await self.c.broker.outbox(OPERATOR, req.limit))

    async def _ack_until(self, req: OpAckReq) -> dict[str, int]:
        return {"acked": await self.c.broker.ack_until(OPERATOR, req.up_to)}

    async def _messages(self, req: OpMessagesReq) -> dict[str, Any]:
        self.c.require_agent(req.agent)
        return {
            "inbox": await self.c.broker.inbox(req.agent, req.limit),
            "outbox": await self.c.broker.outbox(req.agent, req.limit),
        }

    async def _agents(self, req: OpAgentsReq) -> list[dict[str, Any]]:
        return await self.c.agents_view()

    async def _agent_forge(self, req: OpAgentForgeReq) -> dict[str, Any]:
        config = self.c.registry.config(req.agent)
        granted = ToolGroup.FORGE in config.tool_groups
        view = await forge_view(self.c.config.forge, req.agent, granted)
        return view.model_dump()

    async def _topology(self, req: OpTopologyReq) -> dict[str, str | None]:
        return self.c.topology()

    async def _set_parent(self, req: OpSetParentReq) -> dict[str, Any]:
        new_parent = req.new_parent or None
        updated, changed = self.c.topology_store.set_parent(
            req.child, new_parent, self.c.registry.known()
        )
        if changed:
            self.c.bus.emit("topology", child=req.child, parent=new_parent)
        return {"changed": changed, "topology": updated}

    async def _get_loose_ends(self, req: OpLooseEndsReq) -> list[Any]:
        if req.agent == "*":
            return list(await self.c.loose_ends.list_for(None))
        self.c.require_agent(req.agent)
        return list(await self.c.loose_ends.list_for([req.agent]))

    async def _cancel_loose_end(self, req: OpCancelLooseEndReq) -> dict[str, bool]:
        if await self.c.loose_ends.row(req.kind, req.row_id) is None:
            raise NotFound(f"no {req.kind} #{req.row_id}")
        done = await self.c.loose_ends.cancel(req.kind, req.row_id)
        self.c.scheduler.poke()
        if done and req.kind in ("approval", "question"):  # the operator's waiting count
            self.c.bus.emit(req.kind, **{f"{req.kind}_id": req.row_id}, state="cancelled")
        return {"cancelled": done}

    async def _questions(self, req: OpQuestionsReq) -> list[dict[str, object]]:
        return await self.c.loose_ends.questions(req.open_only)

    async def _answer_question(self, req: OpAnswerReq) -> dict[str, Any]:
        self.c.broker.check_body(req.answer)
        asker, msg_id = await self.c.loose_ends.answer_question(req.question_id, req.answer)
        self.c.bus.emit("question", question_id=req.question_id, state="answered")
        return {"asker": asker, "message_id": msg_id}

    async def _spawn(self, req: OpSpawnReq) -> dict[str, Any]:
        validate_agent_name(req.name)
        if self.c.registry.exists(req.name):
            raise InvalidRequest(f"an agent named {req.name!r} already exists")
        if req.parent is not None:
            self.c.require_agent(req.parent)
        await self.c.add_agent(req.name, req.config, req.parent)
        return {
            "name": req.name,
            "parent": req.parent,
            "running": self.c.hostlink.running(req.name),
        }

    async def _approvals(self, req: OpApprovalsReq) -> list[dict[str, Any]]:
        return await self.c.approvals.list(req.pending_only)

    async def _approval_show(self, req: OpApprovalShowReq) -> dict[str, Any]:
        return await self.c.approvals.show(req.approval_id)

    async def _approve(self, req: OpResolveReq) -> dict[str, Any]:
        return await self.c.approvals.resolve(req.approval_id, True, req.reason)

    async def _deny(self, req: OpResolveReq) -> dict[str, Any]:
        if not req.reason.strip():
            raise InvalidRequest("say why: deny needs a reason (--reason), which the asker reads")
        return await self.c.approvals.resolve(req.approval_id, False, req.reason)

    async def _lifecycle(self, req: OpLifecycleReq) -> dict[str, Any]:
        return await self.c.lifecycle.act(None, req.cmd.removeprefix("agent_"), req.agent)

    _agent_kill = _agent_start = _agent_restart = _agent_update = _agent_destroy = _lifecycle

    async def _logs(self, req: OpLogsReq) -> dict[str, Any]:
        self.c.require_agent(req.agent)
        return {"agent": req.agent, "lines": self.c.agent_log_tail(req.agent, req.lines)}

    async def _compact(self, req: OpCompactReq) -> dict[str, Any]:
        self.c.require_agent(req.agent)
        return await self.c.request_compact(req.agent, COMPACT_THRESHOLD)

    async def _agent_config(self, req: OpConfigReq) -> dict[str, Any]:
        cfg = self.c.registry.config(req.agent)
        args = turn_tool_args(cfg)  # exactly what its turns get (bash only with execution)
        return {
            "agent": req.agent,
            "config": cfg.model_dump(mode="json"),
            "tool_groups": [g.value for g in cfg.tool_groups],
            "capabilities": [c.value for c in cfg.capabilities],
            "tools_arg": args.tools,
            "allowed_tools_arg": args.allowed_tools,
        }

    async def _perms_set(self, req: OpPermsSetReq) -> dict[str, Any]:
        current = self.c.registry.config(req.agent)
        try:
            groups = [ToolGroup(g.strip().lower()) for g in req.tool_groups if g.strip()]
            caps = [Capability(c.strip().lower()) for c in req.capabilities if c.strip()]
        except ValueError as exc:
            raise InvalidRequest(f"{exc}; known groups: {', '.join(ToolGroup.ALL)}") from exc
        if not groups:
            raise InvalidRequest("an agent needs at least one tool group")
        proposed = current.model_copy(update={"tool_groups": groups, "capabilities": caps})
        return await self.c.approvals.propose(
            OPERATOR, req.agent, proposed, "permissions: " + ",".join(groups)
        )

    async def _status(self, req: OpStatusReq) -> dict[str, Any]:
        topo = self.c.topology()
        return {
            "home": str(self.c.paths.home),
            "agents": len(self.c.registry.known()),
            "running": sum(self.c.hostlink.running(a) for a in self.c.registry.known()),
            "hosts": sorted(self.c.hostlink.hosts),
            "claude_slots": self.c.hostlink.claude_slots(),
            "waiting_slot": [
                {"agent": agent, "since": since}
                for agent, since in self.c.hostlink.waiting_for_slots()
            ],
            "roots": topology.roots(topo),
            "schema_version": self.c.store.schema_version,
            "pid": self.c.pid,
        }
