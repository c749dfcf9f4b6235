"""An approval the operator is asked for."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["ApprovalRow", "ApprovalState"]


ApprovalState = Literal["pending", "approved", "denied", "cancelled"]


@dataclass(frozen=True, slots=True)
class ApprovalRow:
    id: int
    kind: str
    requester: str
    subject: str
    payload: Mapping[str, Any]
    state: ApprovalState
    created_at: float
    resolved_at: float | None = None
    resolution: str | None = None
