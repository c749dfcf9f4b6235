"""Config changes that need the operator's yes: creating, applying, resolving.

Every change to what an agent *is* (its applied config) goes through here:
an agent asks (``request_init_config``, ``request_apply_commit``) or the
operator proposes (``perms_set``); an approval row holds the exact proposed
text; approving applies it (an entry in the store's deploy log, mirrored as a
commit in the meta repo) and rebuilds the agent. Who may ask for what is
decided from the topology before a row is ever written.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable

from hyperhive import topology
from hyperhive.config import AgentConfig, HivePaths, dump_agent_config, parse_agent_config
from hyperhive.core.activity import ActivityLog
from hyperhive.core.agentdisks import AgentDisks
from hyperhive.core.lifecycle import Lifecycle
from hyperhive.core.loose_ends import LooseEnds
from hyperhive.core.mirror import MetaMirror
from hyperhive.core.notices import Notices
from hyperhive.core.notify import EventBus
from hyperhive.core.registry import AgentRegistry
from hyperhive.effective import effective_config
from hyperhive.errors import Conflict, HiveError, InvalidRequest, NotFound, PermissionDenied
from hyperhive.gitrepo import AGENT_TOML
from hyperhive.names import OPERATOR, validate_agent_name
from hyperhive.protocol import (
    ApprovalDetail,
    ApprovalOutcome,
    ApprovalRequested,
    ApprovalResolved,
    ApprovalView,
    ConfigReady,
    EffectiveView,
    Rebuilt,
    Spawned,
)
from hyperhive.protocol.approvals import (
    ApplyCommitPayload,
    ApprovalPayload,
    InitConfigPayload,
    ReadPayload,
    StoredPayload,
    read_payload,
)
from hyperhive.store import Store
from hyperhive.store.rows import ApprovalRow, ApprovalState
from hyperhive.topology import TopologyStore

__all__ = ["Approvals"]

log = logging.getLogger(__name__)


class Approvals:
    """Proposed config repos are on the agents' hosts: read and committed by asking them."""

    def __init__(
        self,
        paths: HivePaths,
        store: Store,
        registry: AgentRegistry,
        topology_store: TopologyStore,
        disks: AgentDisks,
        mirror: MetaMirror,
        loose_ends: LooseEnds,
        notices: Notices,
        lifecycle: Lifecycle,
        bus: EventBus,
        repo_changed: Callable[[], None] = lambda: None,
    ) -> None:
        self.paths = paths
        self.store = store
        self.registry = registry
        self.topology_store = topology_store
        self.disks = disks
        self.mirror = mirror
        self.loose_ends = loose_ends
        self.notices = notices
        self.activity = ActivityLog(store, bus)
        self.lifecycle = lifecycle
        self.bus = bus
        # Told when a proposed repo moved on here: the mirrors of it catch up.
        self.repo_changed = repo_changed
        self._resolving: set[int] = set()

    # ---- asking ---------------------------------------------------------------------

    async def request_init_config(self, requester: str, name: str, text: str) -> ApprovalRequested:
        validate_agent_name(name)
        topo = self.topology_store.read_cached()
        if self.registry.exists(name) and topo.get(name) != requester:
            owner = topo.get(name) or "no parent (a root agent)"
            raise PermissionDenied(
                f"{name!r} already exists under {owner}; you may only init a brand-new name "
                "or re-init your own direct child (not your child)"
            )
        if name == requester:
            raise PermissionDenied("an agent cannot re-init itself (not your child)")
        if not self.registry.exists(name):
            topology.check_room_below(topo, requester)  # the depth limit set_parent keeps
        config = parse_agent_config(text or "", f"{name}/{AGENT_TOML}", strict=True)
        pending = await self._pending("init_config", name)
        if pending is not None:
            raise Conflict(f"an init of {name!r} is already waiting for approval (#{pending})")
        approval = await self._create(
            requester, InitConfigPayload(agent=name, config=dump_agent_config(config))
        )
        return ApprovalRequested(
            approval_id=approval,
            state="pending",
            note="the operator approves or denies; you get approval_resolved",
        )

    async def request_apply_commit(
        self, requester: str, agent: str, commit: str
    ) -> ApprovalRequested:
        self.registry.require(agent)
        if agent != requester and not topology.is_descendant_of(
            self.topology_store.read_cached(), agent, requester
        ):
            raise PermissionDenied(
                f"{agent} is not you or your descendant (not a descendant); only its "
                "ancestors may apply its config"
            )
        via = await self._mirror_host(requester, agent)
        if via is None:
            shown = await self.disks.show(agent, commit)
            full, text = shown.commit, shown.text
            config = parse_agent_config(
                text, f"{agent}/config@{full[:12]}/{AGENT_TOML}", strict=True
            )
            note = None
            self.repo_changed()  # committed to where it is: its mirrors may be behind
        else:
            full, config, note = await self._from_mirror(via, requester, agent, commit)
        approval = await self._create(
            requester,
            ApplyCommitPayload(agent=agent, commit=full, config=dump_agent_config(config)),
        )
        return ApprovalRequested(approval_id=approval, commit=full, state="pending", note=note)

    async def _mirror_host(self, requester: str, agent: str) -> str | None:
        """The requester's host, when it is not the one holding ``agent``'s repo: the
        requester committed in that host's mirror of it (``core/configmirrors.py``). Known
        here from placement, never from the request."""
        if requester == agent or requester == OPERATOR:
            return None
        if await self.disks.disk_of(requester) == await self.disks.disk_of(agent):
            return None
        return await self.disks.disk_host(requester, place=False)

    async def _from_mirror(
        self, host: str, requester: str, agent: str, commit: str
    ) -> tuple[str, AgentConfig, str]:
        """``commit`` of ``host``'s mirror of ``agent``'s repo, committed into the real
        repo on ``agent``'s host: what the operator approves is what gets applied."""
        shown = await self.disks.show_on(host, agent, commit, mirror=True)
        config = parse_agent_config(
            shown.text, f"{agent}/config@{shown.commit[:12]} (mirror)/{AGENT_TOML}", strict=True
        )
        subject = shown.subject or f"{agent}'s config from {requester}"
        message = (
            f"{subject}\n\nCommitted by {requester} as {shown.commit} in agent host "
            f"{host}'s mirror of this repo."
        )
        written = await self.disks.write(agent, shown.text, message[:2000])
        self.repo_changed()
        note = (
            f"your commit {shown.commit[:12]} is {written.commit[:12]} in {agent}'s own config "
            "repo (on its agent host): the operator approves or denies that"
        )
        return written.commit, config, note

    async def propose(
        self, requester: str, agent: str, config: AgentConfig, subject: str
    ) -> ApprovalRequested:
        """A change the operator (or a tool) proposes: committed to the proposed repo first."""
        self.registry.require(agent)
        # On the agent's host (its pin or placement): refused, naming it, if it is away.
        commit = (await self.disks.write(agent, dump_agent_config(config), subject)).commit
        self.repo_changed()
        approval = await self._create(
            requester,
            ApplyCommitPayload(agent=agent, commit=commit, config=dump_agent_config(config)),
        )
        return ApprovalRequested(approval_id=approval, commit=commit, state="pending")

    # ---- the operator's side -----------------------------------------------------------

    async def list(self, pending_only: bool = True) -> list[ApprovalView]:
        return [self._view(r) for r in await self.store.approvals.list(pending_only)]

    async def show(self, approval_id: int) -> ApprovalDetail:
        row = await self._row(approval_id)
        payload = read_payload(row.kind, row.payload)
        diff = None
        effective = None
        if not isinstance(payload, StoredPayload):
            agent = payload.agent
            current = self.registry.text(agent)
            diff = "".join(
                difflib.unified_diff(
                    current.splitlines(keepends=True),
                    payload.config.splitlines(keepends=True),
                    f"applied/{agent}.toml",
                    f"proposed/{agent}.toml",
                )
            )
            # What approving makes of the agent, not just the text it was asked with.
            if isinstance(payload, InitConfigPayload):
                parent = None if row.requester == OPERATOR else row.requester
            else:
                parent = self.topology_store.read_cached().get(agent)
            config = parse_agent_config(payload.config, f"approval/{agent}.toml")
            effective = EffectiveView.model_validate(
                effective_config(agent, parent, config).as_json()
            )
        return ApprovalDetail(
            **self._view(row).model_dump(), payload=payload, diff=diff, effective=effective
        )

    async def resolve(
        self, approval_id: int, approve: bool, reason: str = "", host: str | None = None
    ) -> ApprovalOutcome:
        """Approve (carry it out) or deny; ``host``: approving a spawn, the agent host
        the new agent is pinned to (None: placed automatically)."""
        if approval_id in self._resolving:
            raise Conflict(f"approval #{approval_id} is being resolved right now")
        self._resolving.add(approval_id)
        try:
            return await self._resolve(approval_id, approve, reason, host)
        finally:
            self._resolving.discard(approval_id)

    async def _resolve(
        self, approval_id: int, approve: bool, reason: str, host: str | None
    ) -> ApprovalOutcome:
        row = await self._row(approval_id)
        if row.state != "pending":
            raise Conflict(f"approval #{approval_id} is already {row.state}")
        payload = read_payload(row.kind, row.payload)
        # Whom it is about: a stored row that no longer reads names none (its requester).
        agent = row.requester if isinstance(payload, StoredPayload) else payload.agent
        if host is not None:
            _check_host_choice(approval_id, approve, row.kind, agent, self.registry.exists(agent))
        state: ApprovalState = "approved" if approve else "denied"
        applied: dict[str, str | None] = {}
        if approve:
            # Carry out first: an approval that failed to apply stays pending, retryable.
            try:
                applied = await self._carry_out(row.requester, payload, host)
            except HiveError as exc:
                raise type(exc)(
                    f"approval #{approval_id} stays pending; applying it failed: {exc.message}"
                ) from exc
        await self.store.approvals.resolve(approval_id, state, reason)
        requester = row.requester
        if requester != OPERATOR and self.registry.exists(requester):
            await self.notices.notify_agent(
                requester,
                ApprovalResolved(
                    agent=agent,
                    approval_id=approval_id,
                    approved=approve,
                    reason=reason,
                ),
            )
        self.bus.emit("approval", approval_id=approval_id, state=state)
        await self.activity.record(
            "approval",
            row.subject,
            f"approval #{approval_id} {state}: {row.kind} for {row.subject}",
            others=[row.requester],
            detail={"approval_id": approval_id, "state": state, "resolution": reason},
            key=f"approval:{approval_id}:resolved",
        )
        return ApprovalOutcome(approval_id=approval_id, state=state, **applied)

    # ---- internals ------------------------------------------------------------------

    async def _carry_out(
        self,
        requester: str,
        payload: ReadPayload,
        host: str | None = None,
    ) -> dict[str, str | None]:
        if isinstance(payload, StoredPayload):
            # A row left by an older hive (update_meta_inputs), or one that no longer
            # reads as its kind: nothing can carry it out.
            raise Conflict(
                f"a {payload.stored_kind} request can no longer be applied "
                f"({payload.problem}); deny it instead"
            )
        agent = payload.agent
        config = parse_agent_config(payload.config, f"approval/{agent}.toml")
        if isinstance(payload, InitConfigPayload):
            fresh = not self.registry.exists(agent)
            parent = requester if requester != OPERATOR else None
            # ``create`` checks the host (known, not revoked) before it makes anything.
            commit = await self.lifecycle.create(
                agent, config, parent, f"init {agent} (requested by {requester})", host=host
            )
            if requester != OPERATOR:
                # Listed, not waking: the approval_resolved message right after wakes the
                # requester once, rather than these a moment before it (two turns).
                event = Spawned(agent=agent) if fresh else Rebuilt(agent=agent)
                await self.notices.notify_agent(requester, event, wake=False)
                await self.notices.notify_agent(requester, ConfigReady(agent=agent), wake=False)
            return {"meta_commit": commit}
        commit = await self.lifecycle.apply(
            agent, config, f"apply {agent} {payload.commit[:12]} (requested by {requester})"
        )
        self.repo_changed()  # its mirrors start from what is now applied
        if requester != OPERATOR:
            await self.notices.notify_agent(requester, Rebuilt(agent=agent), wake=False)
        return {"meta_commit": commit}

    async def _create(self, requester: str, payload: ApprovalPayload) -> int:
        kind, subject = payload.kind, payload.agent
        approval = await self.loose_ends.create_approval(kind, requester, subject, payload.stored())
        self.bus.emit(
            "approval",
            approval_id=approval,
            state="pending",
            approval_kind=kind,
            requester=requester,
            subject=subject,
        )
        log.info("approval #%d: %s %s requested by %s", approval, kind, subject, requester)
        await self.activity.record(
            "approval",
            requester,
            f"approval #{approval} asked: {kind} for {subject} (by {requester})",
            others=[subject],
            detail={"approval_id": approval, "state": "asked"},
            key=f"approval:{approval}:asked",
        )
        return approval

    async def _pending(self, kind: str, subject: str) -> int | None:
        return await self.store.approvals.pending_for(kind, subject)

    async def _row(self, approval_id: int) -> ApprovalRow:
        row = await self.store.approvals.get(approval_id)
        if row is None:
            raise NotFound(f"no approval #{approval_id}; `hivectl approvals list` shows them")
        return row

    @staticmethod
    def _view(row: ApprovalRow) -> ApprovalView:
        return ApprovalView.model_validate(
            {
                "id": row.id,
                "kind": row.kind,
                "requester": row.requester,
                "subject": row.subject,
                "state": row.state,
                "created_at": row.created_at,
                "resolution": row.resolution,
            }
        )


def _check_host_choice(
    approval_id: int, approve: bool, kind: str, agent: str, exists: bool
) -> None:
    """Where a host may be chosen: approving a spawn of an agent that does not exist yet
    (one that exists keeps its host and its files there: ``agents move`` moves it)."""
    if not approve:
        raise InvalidRequest(f"a host is chosen when approving, not denying #{approval_id}")
    if kind != "init_config":
        raise InvalidRequest(
            f"approval #{approval_id} ({kind}) starts no new agent, so it has no host to "
            "choose; `hivectl agents move AGENT --to HOST` moves an agent"
        )
    if exists:
        raise InvalidRequest(
            f"approval #{approval_id} re-initialises {agent}, which already runs on its "
            f"host; approve it without a host, then `hivectl agents move {agent} --to HOST`"
        )
