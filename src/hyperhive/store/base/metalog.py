"""The agent tree, applied agent configs and the deploy log."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

from hyperhive.store.rows import DeployEntry

__all__ = ["MetaLogRepo", "TopologyRepo"]


class TopologyRepo(ABC):
    """The agent tree: child → parent (``None`` = a root)."""

    @abstractmethod
    async def get(self) -> dict[str, str | None]: ...

    @abstractmethod
    async def set(self, tree: Mapping[str, str | None], note: str) -> DeployEntry:
        """Replace the whole tree and log ``note`` (action ``topology``) with it.

        The rules (no cycle, known parent) are the caller's, in ``topology.py``.
        """


class MetaLogRepo(ABC):
    """Applied agent configs and the deploy log (the meta git repo mirrors it)."""

    @abstractmethod
    async def apply_config(
        self, agent: str, config: str, message: str, action: str = "apply"
    ) -> DeployEntry:
        """Make ``config`` (TOML text) the agent's applied config, and log it."""

    @abstractmethod
    async def remove_config(self, agent: str, message: str) -> DeployEntry:
        """Forget the agent's applied config (action ``remove``), and log it."""

    @abstractmethod
    async def note(
        self, action: str, agent: str | None, message: str, *, text: str | None = None
    ) -> DeployEntry:
        """Log an entry that changes no agent's config (e.g. recorded inputs).

        ``text`` is a file the entry records (the hive's inputs), kept in its ``config``.
        """

    @abstractmethod
    async def adopt(
        self,
        configs: Mapping[str, str],
        tree: Mapping[str, str | None] | None,
        message: str,
    ) -> list[DeployEntry]:
        """Take over an older home's files, once: only into an empty deploy log.

        One transaction: every config (action ``import``), then the tree.
        Returns the entries written; ``[]`` if the log already had any (the
        store, not the files, is then the truth), so a second call, or a
        second coordinator racing the first, changes nothing.
        """

    @abstractmethod
    async def since(self, after_seq: int, limit: int = 500) -> list[DeployEntry]:
        """Entries with ``seq > after_seq``, oldest first: what a mirror has yet to export."""

    @abstractmethod
    async def configs(self) -> dict[str, str]:
        """Every agent's applied config text."""

    @abstractmethod
    async def log(self, limit: int = 50, agent: str | None = None) -> list[DeployEntry]:
        """The newest ``limit`` entries (of ``agent`` if given), newest first."""
