"""What subagents need of the agent they belong to.

A Protocol rather than :class:`~hyperhive.agent.active.AgentSite` itself: the
active agent holds its ``SubagentManager``, so importing it here would close
an import cycle (agent/active ↔ subagent/session).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from hyperhive.agent.admission import Admission
from hyperhive.agent.sandbox import AgentSandbox
from hyperhive.config import AgentConfig, HiveConfig, HivePaths
from hyperhive.permissions import ToolGroup

__all__ = ["SubagentHost"]


class SubagentHost(Protocol):
    """The parent agent as a subagent sees it (its ``AgentSite`` is one): read-only."""

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> AgentConfig: ...

    @property
    def paths(self) -> HivePaths: ...

    @property
    def hive(self) -> HiveConfig: ...

    @property
    def groups(self) -> tuple[ToolGroup, ...]: ...

    @property
    def base_url(self) -> str: ...

    @property
    def admission(self) -> Admission:
        """The host's claude slots, which subagents queue for too."""
        ...

    @property
    def runtime_dir(self) -> Path: ...

    @property
    def state_dir(self) -> Path: ...

    def hive_env(self) -> dict[str, str]: ...

    def sandbox(self, *, agent_socket: bool = True) -> AgentSandbox: ...

    def give(self, path: Path) -> None: ...
