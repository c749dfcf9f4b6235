"""What an approval asks for: one model per kind, chosen by ``kind``.

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

__all__ = [
    "ApplyCommitPayload",
    "ApprovalPayload",
    "InitConfigPayload",
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
