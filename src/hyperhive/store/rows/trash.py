"""A destroyed agent's directories still to be trashed on its host."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PendingTrash"]


@dataclass(frozen=True, slots=True)
class PendingTrash:
    """A destroyed agent whose directories are still on ``host``'s disk, to be moved to
    that host's trash when it is connected again (#14: the coordinator has no disk of it)."""

    agent: str
    host: str
    destroyed_at: float
