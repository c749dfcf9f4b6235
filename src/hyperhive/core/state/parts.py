"""The state layer's parts most services read, handed to them as one group."""

from __future__ import annotations

from dataclasses import dataclass

from hyperhive.core.state.agent_state import AgentState
from hyperhive.core.state.mirror import MetaMirror
from hyperhive.core.state.registry import AgentRegistry
from hyperhive.topology import TopologyStore

__all__ = ["HiveState"]


@dataclass(frozen=True, slots=True)
class HiveState:
    """The tree, the applied configs and their git mirror, and agents' state rows."""

    registry: AgentRegistry
    topology: TopologyStore
    mirror: MetaMirror
    agent_state: AgentState
