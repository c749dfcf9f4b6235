"""Destroyed agents' directories waiting for their host."""

from __future__ import annotations

from abc import ABC, abstractmethod

from hyperhive.store.rows import PendingTrash

__all__ = ["TrashRepo"]


class TrashRepo(ABC):
    """Destroyed agents whose directories wait on an absent host's disk for its trash.

    Durable: a destroy while the agent's host is away must still be carried out when
    the host returns, across coordinator restarts and failovers. One row per name (a
    name is not reused while its old directories are still on a disk).
    """

    @abstractmethod
    async def add(self, agent: str, host: str) -> PendingTrash:
        """Record that ``agent``'s directories on ``host`` are to be trashed."""

    @abstractmethod
    async def get(self, agent: str) -> PendingTrash | None: ...

    @abstractmethod
    async def all(self) -> list[PendingTrash]:
        """Every pending trash, oldest first."""

    @abstractmethod
    async def done(self, agent: str) -> None:
        """``agent``'s trash was carried out (or found nothing to move)."""
