"""Helper events for agents: who hears about an agent's lifecycle, and telling them."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from hyperhive import topology
from hyperhive.core.mail.broker import Broker
from hyperhive.core.state.loose_ends import LooseEnds
from hyperhive.core.state.registry import AgentRegistry
from hyperhive.names import OPERATOR, SYSTEM
from hyperhive.permissions import ToolGroup
from hyperhive.protocol import INBOX_EVENTS, HelperEvent, describe
from hyperhive.topology import TopologyStore

__all__ = ["Notices"]

log = logging.getLogger(__name__)


class Notices:
    def __init__(
        self,
        topology_store: TopologyStore,
        registry: AgentRegistry,
        broker: Broker,
        loose_ends: LooseEnds,
        root_agent: str,
    ) -> None:
        self.topology_store = topology_store
        self.registry = registry
        self.broker = broker
        self.loose_ends = loose_ends
        self.root_agent = root_agent

    def submitter_of(self, agent: str) -> str | None:
        """Who hears about ``agent``'s lifecycle: nearest ancestor with ``approvals``,
        else the root manager; None when that would be the agent itself."""
        topo = self.topology_store.read_cached()
        for ancestor in topology.ancestors(topo, agent):
            cfg = self.registry.applied(ancestor)
            if cfg is not None and ToolGroup.APPROVALS in cfg.tool_groups:
                return ancestor
        root = self.root_agent
        if root != agent and self.registry.exists(root):
            return root
        return None

    def submitters_of(self, agents: Iterable[str]) -> dict[str, list[str]]:
        """``agents`` grouped by who hears about them (those nobody hears about left out)."""
        out: dict[str, list[str]] = {}
        for agent in agents:
            submitter = self.submitter_of(agent)
            if submitter is not None:
                out.setdefault(submitter, []).append(agent)
        return out

    async def notify_submitter(self, agent: str, event: HelperEvent) -> None:
        submitter = self.submitter_of(agent)
        if submitter is None:
            log.info("%s for %s: no submitting agent to tell", event.event, agent)
            return
        await self.notify_agent(submitter, event)

    async def notify_operator(self, body: str) -> None:
        """A notice for the operator's inbox, from ``system``."""
        await self.broker.send(SYSTEM, OPERATOR, body)

    async def notify_agent(self, recipient: str, event: HelperEvent, *, wake: bool = True) -> None:
        """Urgent events to the inbox from ``system``, the rest as core todos (``wake=False``:
        listed, but no wake of their own: a message that follows wakes the recipient)."""
        config = self.registry.applied(recipient)
        body = describe(event, config.tool_groups if config is not None else ToolGroup.ALL)
        if event.event in INBOX_EVENTS:
            await self.broker.send(SYSTEM, recipient, body)
        else:
            await self.loose_ends.todo_upsert(recipient, "core", event.key, body, wake=wake)
