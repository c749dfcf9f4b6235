"""The plumbing services that act on their own, handed to those above as one group."""

from __future__ import annotations

from dataclasses import dataclass

from hyperhive.core.infra.agent_sockets import AgentSockets
from hyperhive.core.infra.background import Background
from hyperhive.core.infra.notify import EventBus

__all__ = ["Infra"]


@dataclass(frozen=True, slots=True)
class Infra:
    """The event bus, the background task group and the agents' sockets."""

    bus: EventBus
    background: Background
    sockets: AgentSockets
