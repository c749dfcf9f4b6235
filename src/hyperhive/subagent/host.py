"""What subagents need of the agent they belong to.

A Protocol rather than ``AgentRuntime`` itself: the runtime holds its
``SubagentManager``, so importing the runtime here would close an import cycle
(agent/runtime ↔ subagent/session).
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
    """The parent agent as a subagent sees it (``AgentRuntime`` is one)."""

    name: str
    config: AgentConfig
    paths: HivePaths
    hive: HiveConfig
    groups: tuple[ToolGroup, ...]
    base_url: str
    admission: Admission  # the host's claude slots, which subagents queue for too

    @property
    def runtime_dir(self) -> Path: ...

    @property
    def state_dir(self) -> Path: ...

    def hive_env(self) -> dict[str, str]: ...

    def sandbox(self, *, agent_socket: bool = True) -> AgentSandbox: ...

    def give(self, path: Path) -> None: ...
