"""Approvals the operator answers."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from hyperhive.store.rows import ApprovalRow, ApprovalState

__all__ = ["ApprovalRepo"]


class ApprovalRepo(ABC):
    @abstractmethod
    async def create(
        self, kind: str, requester: str, subject: str, payload: Mapping[str, Any]
    ) -> int: ...

    @abstractmethod
    async def get(self, approval_id: int) -> ApprovalRow | None: ...

    @abstractmethod
    async def list(self, pending_only: bool = True) -> list[ApprovalRow]: ...

    @abstractmethod
    async def pending_for(self, kind: str, subject: str) -> int | None:
        """The id of a pending approval of ``kind`` for ``subject``, if one exists."""

    @abstractmethod
    async def resolve(self, approval_id: int, state: ApprovalState, resolution: str) -> ApprovalRow:
        """Close a pending approval. ``NotFound``; ``Conflict`` if already closed."""
