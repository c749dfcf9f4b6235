"""Config changes that need the operator's yes: creating, applying, resolving.

Every change to what an agent *is* (its applied config) goes through here:
an agent asks (``request_init_config``, ``request_apply_commit``,
``request_update_meta_inputs``) or the operator proposes (``perms_set``); an
approval row holds the exact proposed text; approving applies it as a commit
in the meta repo and rebuilds the agent. Who may ask for what is decided
from the topology before a row is ever written.
"""

from __future__ import annotations

import difflib
import logging
import os
from typing import TYPE_CHECKING, Any

from hyperhive import topology
from hyperhive.atomic import atomic_write_text
from hyperhive.config import AgentConfig, dump_agent_config, parse_agent_config
from hyperhive.core.meta import AGENT_TOML
from hyperhive.effective import effective_config
from hyperhive.errors import Conflict, HiveError, NotFound, PermissionDenied
from hyperhive.names import OPERATOR, validate_agent_name
from hyperhive.protocol import ApprovalResolved, ConfigReady, Rebuilt, Spawned
from hyperhive.store.rows import ApprovalRow, ApprovalState

if TYPE_CHECKING:
    from hyperhive.core.coordinator import Coordinator

__all__ = ["Approvals"]

log = logging.getLogger(__name__)


class Approvals:
    def __init__(self, coord: Coordinator) -> None:
        self.c = coord
        self._resolving: set[int] = set()

    # ---- asking ---------------------------------------------------------------------

    async def request_init_config(self, requester: str, name: str, text: str) -> dict[str, Any]:
        validate_agent_name(name)
        topo = self.c.topology()
        if self.c.registry.exists(name) and topo.get(name) != requester:
            owner = topo.get(name) or "no parent (a root agent)"
            raise PermissionDenied(
                f"{name!r} already exists under {owner}; you may only init a brand-new name "
                "or re-init your own direct child (not your child)"
            )
        if name == requester:
            raise PermissionDenied("an agent cannot re-init itself (not your child)")
        config = parse_agent_config(text or "", f"{name}/{AGENT_TOML}")
        pending = await self._pending("init_config", name)
        if pending is not None:
            raise Conflict(f"an init of {name!r} is already waiting for approval (#{pending})")
        approval = await self._create(
            "init_config", requester, name, {"agent": name, "config": dump_agent_config(config)}
        )
        return {
            "approval_id": approval,
            "state": "pending",
            "note": "the operator approves or denies; you get approval_resolved",
        }

    async def request_apply_commit(self, requester: str, agent: str, commit: str) -> dict[str, Any]:
        self.c.require_agent(agent)
        if agent != requester and not topology.is_descendant_of(
            self.c.topology(), agent, requester
        ):
            raise PermissionDenied(
                f"{agent} is not you or your descendant (not a descendant); only its "
                "ancestors may apply its config"
            )
        repo = self.c.meta.proposed(agent)
        full = repo.resolve(commit)
        text = repo.show(full, AGENT_TOML)
        config = parse_agent_config(text, f"{agent}/config@{full[:12]}/{AGENT_TOML}")
        approval = await self._create(
            "apply_commit",
            requester,
            agent,
            {"agent": agent, "commit": full, "config": dump_agent_config(config)},
        )
        return {"approval_id": approval, "commit": full, "state": "pending"}

    async def propose(
        self, requester: str, agent: str, config: AgentConfig, subject: str
    ) -> dict[str, Any]:
        """A change the operator (or a tool) proposes: committed to the proposed repo first."""
        self.c.require_agent(agent)
        repo = self.c.meta.proposed(agent)
        atomic_write_text(repo.path / AGENT_TOML, dump_agent_config(config))
        if repo.run_as is not None:
            os.chown(repo.path / AGENT_TOML, *repo.run_as, follow_symlinks=False)
        commit = repo.commit_file(subject, AGENT_TOML, dump_agent_config(config)) or repo.head()
        approval = await self._create(
            "apply_commit",
            requester,
            agent,
            {"agent": agent, "commit": commit, "config": dump_agent_config(config)},
        )
        return {"approval_id": approval, "commit": commit, "state": "pending"}

    async def request_update_meta_inputs(
        self, requester: str, version: str, reason: str
    ) -> dict[str, Any]:
        if self.c.topology().get(requester) is not None:
            raise PermissionDenied(
                "only a root agent may ask to update the hive's inputs (not a root)"
            )
        approval = await self._create(
            "update_meta_inputs",
            requester,
            "claude-code",
            {"claude_version": version, "reason": reason},
        )
        return {"approval_id": approval, "state": "pending"}

    # ---- the operator's side -----------------------------------------------------------

    async def list(self, pending_only: bool = True) -> list[dict[str, Any]]:
        return [self._view(r) for r in await self.c.store.approvals.list(pending_only)]

    async def show(self, approval_id: int) -> dict[str, Any]:
        row = await self._row(approval_id)
        view = self._view(row)
        payload = dict(row.payload)
        if "config" in payload:
            agent = payload["agent"]
            path = self.c.paths.applied_config(agent)
            current = path.read_text() if path.exists() else ""
            view["diff"] = "".join(
                difflib.unified_diff(
                    current.splitlines(keepends=True),
                    payload["config"].splitlines(keepends=True),
                    f"applied/{agent}.toml",
                    f"proposed/{agent}.toml",
                )
            )
            # What approving makes of the agent, not just the text it was asked with.
            if row.kind == "init_config":
                parent = None if row.requester == OPERATOR else row.requester
            else:
                parent = self.c.topology().get(agent)
            config = parse_agent_config(payload["config"], f"approval/{agent}.toml")
            view["effective"] = effective_config(agent, parent, config).as_json()
        view["payload"] = payload
        return view

    async def resolve(self, approval_id: int, approve: bool, reason: str = "") -> dict[str, Any]:
        if approval_id in self._resolving:
            raise Conflict(f"approval #{approval_id} is being resolved right now")
        self._resolving.add(approval_id)
        try:
            return await self._resolve(approval_id, approve, reason)
        finally:
            self._resolving.discard(approval_id)

    async def _resolve(self, approval_id: int, approve: bool, reason: str) -> dict[str, Any]:
        row = await self._row(approval_id)
        if row.state != "pending":
            raise Conflict(f"approval #{approval_id} is already {row.state}")
        payload = dict(row.payload)
        state: ApprovalState = "approved" if approve else "denied"
        applied: dict[str, Any] = {}
        if approve:
            # Carry out first: an approval that failed to apply stays pending, retryable.
            try:
                applied = await self._carry_out(row.kind, row.requester, payload)
            except HiveError as exc:
                raise type(exc)(
                    f"approval #{approval_id} stays pending; applying it failed: {exc.message}"
                ) from exc
        await self.c.store.approvals.resolve(approval_id, state, reason)
        requester = row.requester
        if requester != OPERATOR and self.c.registry.exists(requester):
            await self.c.notify_agent(
                requester,
                ApprovalResolved(
                    agent=payload.get("agent", requester),
                    approval_id=approval_id,
                    approved=approve,
                    reason=reason,
                ),
            )
        self.c.bus.emit("approval", approval_id=approval_id, state=state)
        return {"approval_id": approval_id, "state": state, **applied}

    # ---- internals ------------------------------------------------------------------

    async def _carry_out(
        self, kind: str, requester: str, payload: dict[str, Any]
    ) -> dict[str, Any]:
        if kind == "update_meta_inputs":
            commit = self.c.meta.record_inputs(payload["claude_version"])
            return {
                "meta_commit": commit,
                "note": "recorded in meta/inputs.toml; run scripts/bootstrap after changing "
                "package.json's pin to install it",
            }
        agent = payload["agent"]
        config = parse_agent_config(payload["config"], f"approval/{agent}.toml")
        if kind == "init_config":
            fresh = not self.c.registry.exists(agent)
            parent = requester if requester != OPERATOR else None
            commit = await self.c.lifecycle.create(
                agent, config, parent, f"init {agent} (requested by {requester})"
            )
            if requester != OPERATOR:
                await self.c.notify_agent(
                    requester, Spawned(agent=agent) if fresh else Rebuilt(agent=agent)
                )
                await self.c.notify_agent(requester, ConfigReady(agent=agent))
            return {"meta_commit": commit}
        commit = await self.c.lifecycle.apply(
            agent,
            config,
            f"apply {agent} {payload.get('commit', '')[:12]} (requested by {requester})",
        )
        if requester != OPERATOR:
            await self.c.notify_agent(requester, Rebuilt(agent=agent))
        return {"meta_commit": commit}

    async def _create(
        self, kind: str, requester: str, subject: str, payload: dict[str, Any]
    ) -> int:
        approval = await self.c.loose_ends.create_approval(kind, requester, subject, payload)
        self.c.bus.emit(
            "approval",
            approval_id=approval,
            state="pending",
            approval_kind=kind,
            requester=requester,
            subject=subject,
        )
        log.info("approval #%d: %s %s requested by %s", approval, kind, subject, requester)
        return approval

    async def _pending(self, kind: str, subject: str) -> int | None:
        return await self.c.store.approvals.pending_for(kind, subject)

    async def _row(self, approval_id: int) -> ApprovalRow:
        row = await self.c.store.approvals.get(approval_id)
        if row is None:
            raise NotFound(f"no approval #{approval_id}; `hivectl approvals list` shows them")
        return row

    @staticmethod
    def _view(row: ApprovalRow) -> dict[str, Any]:
        return {
            "id": row.id,
            "kind": row.kind,
            "requester": row.requester,
            "subject": row.subject,
            "state": row.state,
            "created_at": row.created_at,
            "resolution": row.resolution,
        }
