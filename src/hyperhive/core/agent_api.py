"""What an agent may ask of the coordinator, on its own socket.

``AgentApi(coord, name)`` is bound to one agent's listener: ``name`` is who
is asking, whatever the request says. Commands that are MCP tools are gated
here by the agent's tool groups (server-side; ``--allowedTools`` is only a
convenience), and every cross-agent action is checked against the topology.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from hyperhive import topology
from hyperhive.core.loose_ends import owner_of
from hyperhive.errors import (
    Conflict,
    InvalidName,
    InvalidRequest,
    LimitExceeded,
    NotFound,
    PermissionDenied,
    ToolGroupDenied,
)
from hyperhive.names import RESERVED_NAMES, validate_task_name
from hyperhive.permissions import HYPERHIVE_SERVER, Capability, group_for_tool
from hyperhive.protocol import (
    AckUntilReq,
    AskOperatorReq,
    AttachReq,
    CancelLooseEndReq,
    CancelScheduleReq,
    CompactReq,
    FenceReq,
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
    TodoClearReq,
    TodoUpsertReq,
    TurnEndReq,
    WaitReq,
    WakeReq,
)
from hyperhive.protocol.agent import REMIND_MAX_BYTES

if TYPE_CHECKING:
    from hyperhive.core.coordinator import Coordinator

__all__ = ["COMPACT_THRESHOLD", "STATUS_MAX", "AgentApi"]

COMPACT_THRESHOLD = 0.66
STATUS_MAX = 200


class AgentApi:
    """The dispatcher behind ``run/agents/<name>.sock``."""

    def __init__(self, coord: Coordinator, name: str) -> None:
        self.c = coord
        self.name = name

    def _gate(self, cmd: str) -> None:
        group = group_for_tool(HYPERHIVE_SERVER, cmd)
        if group is None:
            return
        groups = self.c.registry.config(self.name).tool_groups
        if group not in groups:
            raise ToolGroupDenied(
                f"{cmd} needs the {group.value!r} tool group, which {self.name} does not have; "
                "the operator can grant it in the permissions tab (hivectl perms set)"
            )

    async def __call__(self, req: Any) -> Any:
        self._gate(req.cmd)
        handler = getattr(self, f"_{req.cmd}")
        return await handler(req)

    # ---- messaging ---------------------------------------------------------

    async def _send(self, req: SendReq) -> dict[str, Any]:
        recipient = self.c.resolve_recipient(self.name, req.to)
        cfg = self.c.registry.config(self.name)
        decision = topology.check_route(
            self.c.topology(), self.name, recipient, cfg.allowed_recipients, cfg.extra_recipients
        )
        if not decision.allowed:
            raise topology.refuse_route(self.name, recipient, decision)
        msg_id = await self.c.broker.send(self.name, recipient, req.body, req.in_reply_to)
        return {"id": msg_id, "to": recipient}

    async def _recv(self, req: RecvReq) -> list[Any]:
        return list(await self.c.broker.recv(self.name, req.max))

    async def _ack_until(self, req: AckUntilReq) -> dict[str, int]:
        return {"acked": await self.c.broker.ack_until(self.name, req.up_to)}

    async def _ask_operator(self, req: AskOperatorReq) -> dict[str, int]:
        self.c.broker.check_body(req.question)
        qid, mid = await self.c.loose_ends.ask_operator(self.name, req.question)
        self.c.bus.emit("question", question_id=qid, state="open", asker=self.name)
        return {"question_id": qid, "message_id": mid}

    # ---- harness -----------------------------------------------------------

    async def _wait(self, req: WaitReq) -> Any:
        return await self.c.broker.wait(self.name, req.timeout, req.todo_version)

    async def _attach(self, req: AttachReq) -> dict[str, Any]:
        incarnation = await self.c.broker.attach(self.name)
        return {"incarnation": incarnation, "agent": self.name}

    async def _fence(self, req: FenceReq) -> None:
        await self.c.broker.fence(self.name)

    async def _turn_end(self, req: TurnEndReq) -> dict[str, Any]:
        return await self.c.turn_end(self.name, req)

    # ---- in-sandbox producers ----------------------------------------------

    async def _wake(self, req: WakeReq) -> dict[str, int]:
        label = req.sender
        try:
            validate_task_name(label)
        except InvalidName as exc:
            raise InvalidRequest(f"wake label: {exc.message}") from exc
        if label in RESERVED_NAMES or self.c.registry.exists(label):
            raise PermissionDenied(
                f"wake label {label!r} is an agent or reserved name; a producer names itself "
                "(e.g. 'matrix', 'forge'), never someone else"
            )
        return {"id": await self.c.broker.send(label, self.name, req.body)}

    async def _todo_upsert(self, req: TodoUpsertReq) -> dict[str, int]:
        self.c.broker.check_body(req.body)
        return {
            "id": await self.c.loose_ends.todo_upsert(self.name, req.subsystem, req.key, req.body)
        }

    async def _todo_clear(self, req: TodoClearReq) -> dict[str, bool]:
        return {"cleared": await self.c.loose_ends.todo_clear(self.name, req.subsystem, req.key)}

    async def _compact(self, req: CompactReq) -> dict[str, Any]:
        return await self.c.request_compact(self.name, COMPACT_THRESHOLD)

    # ---- inbox -------------------------------------------------------------

    async def _remind(self, req: RemindReq) -> dict[str, Any]:
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
        rid = await self.c.loose_ends.remind(self.name, req.message, max(due, now))
        self.c.scheduler.poke()
        return {"id": rid, "due_at": due}

    async def _get_loose_ends(self, req: GetLooseEndsReq) -> list[Any]:
        target = req.agent or self.name
        if target == "*":
            raise PermissionDenied(
                "the hive-wide '*' query is only for the operator; pass an agent name"
            )
        if target != self.name:
            self.c.require_agent(target)
            topo = self.c.topology()
            if not topology.is_descendant_of(topo, target, self.name):
                caps = self.c.registry.config(self.name).capabilities
                if Capability.QUERY_AGENT_STATE not in caps:
                    raise PermissionDenied(
                        f"{target} is not your descendant; reading its loose ends needs the "
                        "query_agent_state capability"
                    )
        return list(await self.c.loose_ends.list_for([target]))

    async def _cancel_loose_end(self, req: CancelLooseEndReq) -> dict[str, bool]:
        topo = self.c.topology()
        if req.kind == "approval" and topo.get(self.name) is not None:
            raise PermissionDenied("only a root agent may cancel an approval (not a root)")
        row = await self.c.loose_ends.row(req.kind, req.row_id)
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
        done = await self.c.loose_ends.cancel(req.kind, req.row_id)
        if req.kind == "reminder":
            self.c.scheduler.poke()
        if done and req.kind in ("approval", "question"):  # the operator's waiting count
            self.c.bus.emit(req.kind, **{f"{req.kind}_id": req.row_id}, state="cancelled")
        return {"cancelled": done}

    # ---- meta --------------------------------------------------------------

    async def _set_status(self, req: SetStatusReq) -> dict[str, str]:
        text = req.text.strip()
        if "\n" in text or "\r" in text:
            raise InvalidRequest("status must be a single line")
        if len(text) > STATUS_MAX:
            raise LimitExceeded(f"status is {len(text)} characters; the limit is {STATUS_MAX}")
        await self.c.set_status(self.name, text)
        return {"status_text": text}

    async def _get_agent_meta(self, req: GetAgentMetaReq) -> Any:
        return await self.c.agent_meta(req.name or self.name)

    # ---- scheduling --------------------------------------------------------

    def _self_or_descendant(self, target: str) -> None:
        self.c.require_agent(target)
        if target != self.name and not topology.is_descendant_of(
            self.c.topology(), target, self.name
        ):
            raise PermissionDenied(f"{target} is not you or your descendant (not a descendant)")

    async def _schedule_prompt(self, req: SchedulePromptReq) -> dict[str, int]:
        self._self_or_descendant(req.target)
        self.c.broker.check_body(req.prompt)
        sid = await self.c.loose_ends.schedule(
            self.name, req.target, req.prompt, req.every_seconds, req.cron
        )
        self.c.scheduler.poke()
        return {"id": sid}

    async def _list_schedules(self, req: ListSchedulesReq) -> list[dict[str, object]]:
        scope = [self.name, *topology.descendants(self.c.topology(), self.name)]
        return await self.c.loose_ends.schedules_for(scope)

    # ---- lifecycle (target table of spec 004) ------------------------------------------

    async def _request_init_config(self, req: RequestInitConfigReq) -> dict[str, Any]:
        return await self.c.approvals.request_init_config(self.name, req.name, req.config)

    async def _request_apply_commit(self, req: RequestApplyCommitReq) -> dict[str, Any]:
        return await self.c.approvals.request_apply_commit(self.name, req.agent, req.commit)

    async def _request_update_meta_inputs(self, req: RequestUpdateMetaInputsReq) -> dict[str, Any]:
        return await self.c.approvals.request_update_meta_inputs(
            self.name, req.claude_version, req.reason
        )

    async def _lifecycle(self, req: LifecycleReq) -> dict[str, Any]:
        return await self.c.lifecycle.act(self.name, req.cmd, req.agent)

    _kill = _start = _restart = _update = _destroy = _lifecycle

    async def _get_logs(self, req: GetLogsReq) -> dict[str, Any]:
        self.c.lifecycle.check_manage(self.name, "get_logs", req.agent)
        return {"agent": req.agent, "lines": self.c.agent_log_tail(req.agent, req.lines)}

    async def _get_host_journal(self, req: GetHostJournalReq) -> dict[str, Any]:
        if Capability.READ_HOST_JOURNAL not in self.c.registry.config(self.name).capabilities:
            raise PermissionDenied(
                "get_host_journal needs the read_host_journal capability (permissions tab)"
            )
        return self.c.host_journal(req.lines)

    async def _cancel_schedule(self, req: CancelScheduleReq) -> dict[str, bool]:
        row = await self.c.loose_ends.schedule_row(req.schedule_id)
        if row is None:
            raise NotFound(f"no schedule #{req.schedule_id}")
        owner = row.owner
        if owner != self.name and not topology.is_descendant_of(
            self.c.topology(), owner, self.name
        ):
            # Moderation runs downward only: a target cannot cancel what its parent set.
            raise PermissionDenied(
                f"schedule #{req.schedule_id} was set by {owner}; only its owner or the "
                "owner's ancestors may cancel it (not a descendant)"
            )
        if row.cancelled_at is not None:
            raise Conflict(f"schedule #{req.schedule_id} is already cancelled")
        return {"cancelled": await self.c.loose_ends.cancel("schedule", req.schedule_id)}
