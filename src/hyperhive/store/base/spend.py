"""What claude runs cost, budget overrides and notices sent."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

from hyperhive.runcost import Figures
from hyperhive.store.rows import SpendEntry, SpendPoint, SpendRun, SpendTotal

__all__ = ["SpendRepo"]


class SpendRepo(ABC):
    """What claude runs cost, the run-time budget limits, and which notices were sent.

    Limits configured in files live in the configs; this repository holds the
    operator's run-time overrides (``hivectl budget set``) so they survive a
    restart. ``scope`` is an agent name or ``"*"`` for the whole hive.
    """

    @abstractmethod
    async def record(self, run: SpendRun) -> tuple[SpendEntry, bool]:
        """Count one run at its own figures; ``(its entry, False)`` if its key is known.

        In one transaction: the run's own figures are
        :func:`~hyperhive.runcost.run_cost` of its session's previous totals
        (kept per agent and session id, none for a new session) and the totals
        it reported, which become the session's previous totals. A run already
        recorded changes nothing and hands back what it was counted at.
        """

    @abstractmethod
    async def session_totals(self, agent: str, session_id: str | None) -> dict[str, Figures]:
        """The totals ``agent``'s session last reported, per model (empty: none kept)."""

    @abstractmethod
    async def totals(self, since: float | None = None) -> dict[str, SpendTotal]:
        """Per agent, the spend recorded at or after ``since`` (``None``: all time)."""

    @abstractmethod
    async def series(self, since: float, origin: float, bucket: float) -> list[SpendPoint]:
        """Per agent and bucket, spend at or after ``since``, by bucket then agent.

        Buckets are ``bucket`` seconds long, aligned on ``origin`` (≤ ``since``).
        """

    @abstractmethod
    async def entries(self, agent: str | None = None, limit: int = 100) -> list[SpendEntry]:
        """The newest ``limit`` entries (of ``agent`` if given), newest first."""

    @abstractmethod
    async def overrides(self) -> dict[str, dict[str, float | None]]:
        """Every scope's run-time limit overrides (a key set to ``None`` = unlimited)."""

    @abstractmethod
    async def set_overrides(self, scope: str, limits: Mapping[str, float | None]) -> None:
        """Replace ``scope``'s overrides; an empty mapping drops them (configs rule again)."""

    @abstractmethod
    async def mark_notice(self, scope: str, marker: str) -> bool:
        """Remember a notice sent; ``False`` if ``(scope, marker)`` was already sent."""
