"""Each agent's last snapshot of its durable state."""

from __future__ import annotations

from abc import ABC, abstractmethod

from hyperhive.store.rows import SnapshotHead, StoredSnapshot

__all__ = ["SnapshotRepo"]


class SnapshotRepo(ABC):
    """Each agent's last snapshot: the files of its durable state, for a replacement on
    another host (``on_host_loss = "replace"``). One row per agent, replaced whole and
    atomically: a reader sees the previous snapshot or the new one, never a mix."""

    @abstractmethod
    async def put(self, snapshot: StoredSnapshot) -> None:
        """Keep ``snapshot`` as its agent's last one (the previous one goes)."""

    @abstractmethod
    async def head(self, agent: str) -> SnapshotHead | None:
        """What ``agent``'s last snapshot is, without its bytes; ``None``: none kept."""

    @abstractmethod
    async def get(self, agent: str) -> StoredSnapshot | None:
        """``agent``'s last snapshot, bytes and all; ``None``: none kept."""

    @abstractmethod
    async def forget(self, agent: str) -> None:
        """Drop ``agent``'s snapshot (it was destroyed)."""
