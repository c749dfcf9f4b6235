"""Which host holds each agent, and moves between hosts."""

from __future__ import annotations

from abc import ABC, abstractmethod

from hyperhive.errors import NotFound
from hyperhive.store.rows import Assignment

__all__ = ["PlacementRepo", "move_missing"]


def move_missing(agent: str) -> NotFound:
    return NotFound(f"{agent} has no `agents move` in progress (or it was resolved)")


class PlacementRepo(ABC):
    """Which agent host each agent is assigned to (durable: survives a failover), pins,
    and the phase of an ``agents move`` in progress.

    A move is undone before its commit (``commit_move``): until then the agent
    belongs on its source. ``commit_move`` switches the assignment to the target
    and leaves the phase ``cleanup`` until the source has dropped its copy.
    """

    @abstractmethod
    async def get(self, agent: str) -> Assignment | None: ...

    @abstractmethod
    async def all(self) -> list[Assignment]:
        """Every assignment, by agent."""

    @abstractmethod
    async def per_host(self) -> dict[str, int]:
        """How many agents are assigned to each host (hosts with none are absent).

        Placement asks this for every agent it starts: counted by the database, not by
        loading every assignment (a host's registration starting 1,000 agents did that
        1,000 times)."""

    @abstractmethod
    async def assign(self, agent: str, host: str, *, pinned: bool) -> Assignment:
        """Put ``agent`` on ``host`` (replacing any assignment; a move in progress stays)."""

    @abstractmethod
    async def forget(self, agent: str) -> None:
        """Drop ``agent``'s assignment (it was destroyed)."""

    @abstractmethod
    async def begin_move(self, agent: str, move_id: str, target: str) -> Assignment:
        """Record a move of ``agent`` from its host to ``target``, phase ``draining``.
        ``NotFound`` if it has no assignment, ``Conflict`` if a move is in progress."""

    @abstractmethod
    async def move_phase(self, agent: str, move_id: str, phase: str) -> None:
        """Advance the move ``move_id``'s phase (``NotFound``: not that move any more)."""

    @abstractmethod
    async def commit_move(self, agent: str, move_id: str) -> Assignment:
        """The target has the agent: assign it there (keeping the pin), phase ``cleanup``."""

    @abstractmethod
    async def end_move(self, agent: str, move_id: str) -> None:
        """Forget the move ``move_id`` (undone before commit, or its cleanup done)."""
