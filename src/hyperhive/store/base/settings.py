"""The hive's own few durable values."""

from __future__ import annotations

from abc import ABC, abstractmethod

__all__ = ["SettingsRepo"]


class SettingsRepo(ABC):
    """The hive's own few durable values (its id), shared by every coordinator of it:
    on PostgreSQL two coordinators on different machines read the same row."""

    @abstractmethod
    async def get(self, key: str) -> str | None:
        """``key``'s value, or ``None`` if none is kept."""

    @abstractmethod
    async def keep(self, key: str, value: str) -> str:
        """Keep ``value`` under ``key`` unless a value is kept there already; the kept
        value either way (the first to keep one wins, atomically)."""
