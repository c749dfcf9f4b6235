"""Approvals: what one asks for, one model per kind chosen by ``kind``, and the
operator's requests to list, show, approve or deny them (and to propose a
change of an agent's permissions, which is an approval too).

An approval row keeps its kind in a column of its own and the rest of what was
asked as JSON (the store's ``payload``, written by ``payload.stored()``).
:func:`read_payload` is the one way back: a row that does not read as its kind
(a kind this hive no longer takes, like ``update_meta_inputs``, or a damaged
row) comes back as a :class:`StoredPayload` that says why, so the operator can
still see it and deny it; nothing carries one out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter, ValidationError

from hyperhive.protocol.base import ApprovalRequested, Req, RowId, _Out

__all__ = [
    "ApplyCommitPayload",
    "ApprovalDetail",
    "ApprovalOutcome",
    "ApprovalPayload",
    "ApprovalView",
    "EffectiveView",
    "InitConfigPayload",
    "OpApprovalShowReq",
    "OpApprovalsReq",
    "OpPermsSetReq",
    "OpResolveReq",
    "PayloadView",
    "ReadPayload",
    "StoredPayload",
    "read_payload",
]


class _Payload(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def stored(self) -> dict[str, Any]:
        """The row's ``payload`` column: everything but the kind (a column of its own)."""
        return self.model_dump(mode="json", exclude={"kind"})


class InitConfigPayload(_Payload):
    """Create ``agent`` (or re-init its requester's own child) with ``config``."""

    kind: Literal["init_config"] = "init_config"
    agent: str
    config: str  # the agent.toml, as approving writes it


class ApplyCommitPayload(_Payload):
    """Apply ``commit`` of ``agent``'s proposed config repo: ``config`` is its agent.toml."""

    kind: Literal["apply_commit"] = "apply_commit"
    agent: str
    commit: str
    config: str


ApprovalPayload = Annotated[InitConfigPayload | ApplyCommitPayload, Field(discriminator="kind")]
"""What this hive asks the operator to approve, and carries out when approved."""


class StoredPayload(BaseModel):
    """A stored request that does not read as a kind this hive carries out: shown as it
    was stored, with why, and only denied."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["stored"] = "stored"
    stored_kind: str
    stored: dict[str, JsonValue]
    problem: str


ReadPayload = InitConfigPayload | ApplyCommitPayload | StoredPayload
"""An approval's payload as read back from its row (:func:`read_payload`)."""

PayloadView = Annotated[ReadPayload, Field(discriminator="kind")]
"""An approval's payload as the operator sees it (on the wire)."""

_PAYLOADS: TypeAdapter[InitConfigPayload | ApplyCommitPayload] = TypeAdapter(ApprovalPayload)


def read_payload(kind: str, stored: Mapping[str, Any]) -> ReadPayload:
    """A row's ``kind`` and ``payload`` column as its model, or as stored with the reason."""
    if kind not in ("init_config", "apply_commit"):
        return StoredPayload(
            stored_kind=kind,
            stored=dict(stored),
            problem=f"this hive no longer takes {kind} requests",
        )
    try:
        return _PAYLOADS.validate_python({**stored, "kind": kind})
    except ValidationError as exc:
        problem = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'][1:]) or 'payload'}: {e['msg']}"
            for e in exc.errors()[:3]
        )
        return StoredPayload(stored_kind=kind, stored=dict(stored), problem=problem)


# ---- the operator's approvals (its socket) ----------------------------------


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


class OpPermsSetReq(Req[ApprovalRequested]):
    """Propose new tool groups/capabilities for an agent (an approval to apply)."""

    cmd: Literal["perms_set"]
    agent: str
    tool_groups: list[str]
    capabilities: list[str] = Field(default_factory=list)
