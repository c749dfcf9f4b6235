"""What an agent may ask of the coordinator, on its own socket: the context every
handler gets, and the gate in front of them.

``AgentApi(name, …parts)`` is bound to one agent's listener: ``name`` is who
is asking, whatever the request says. Commands that are MCP tools are gated
here by the agent's tool groups (server-side; ``--allowedTools`` is only a
convenience) — by the tool's one declaration, the same the MCP surface
reads — and every cross-agent action is checked against the topology. The
handlers live beside this module, one module per concern, each registered on
``AGENT_TABLE``.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from hyperhive import topology
from hyperhive.config import AgentConfig
from hyperhive.core.fleet.parts import Fleet
from hyperhive.core.infra.notify import EventBus
from hyperhive.core.mail.parts import Mail
from hyperhive.core.ops.parts import Ops
from hyperhive.core.state.identities import AgentIdentities
from hyperhive.core.state.parts import HiveState
from hyperhive.dispatch import Dispatcher
from hyperhive.errors import NotFound, PermissionDenied, ToolGroupDenied
from hyperhive.names import OPERATOR, PARENT_SENTINEL
from hyperhive.permissions import HYPERHIVE_SERVER, declaration
from hyperhive.protocol import AgentRequest

__all__ = ["AGENT_TABLE", "COMPACT_THRESHOLD", "STATUS_MAX", "AgentApi", "gate"]

COMPACT_THRESHOLD = 0.66
STATUS_MAX = 200

# Each concern's module registers its handlers here; the package seals the table.
AGENT_TABLE: Dispatcher[AgentApi] = Dispatcher("agent socket", AgentRequest)


def gate(cmd: str, agent: str, config: AgentConfig) -> None:
    """Refuse ``cmd`` when it is a hyperhive tool ``config`` does not grant ``agent``.

    The tool's own declaration decides, as on the MCP surface; a command that
    is no tool (the harness's, a producer's) passes.
    """
    tool = declaration(HYPERHIVE_SERVER, cmd)
    if tool is None:
        return
    why = tool.refusal(agent, config.tool_groups, config.capabilities)
    if why is not None:
        raise (ToolGroupDenied if tool.group is not None else PermissionDenied)(why)


class AgentApi:
    """The handlers behind ``run/agents/<name>.sock``, bound to the agent ``name``."""

    def __init__(
        self,
        name: str,
        *,
        hive_name: str,
        state: HiveState,
        mail: Mail,
        fleet: Fleet,
        ops: Ops,
        bus: EventBus,
        identities: AgentIdentities,
    ) -> None:
        self.name = name
        self.hive_name = hive_name
        self.registry = state.registry
        self.topology_store = state.topology
        self.broker = mail.broker
        self.loose_ends = mail.loose_ends
        self.scheduler = mail.scheduler
        self.agent_state = state.agent_state
        self.approvals = ops.approvals
        self.lifecycle = ops.lifecycle
        self.logs = fleet.logs
        self.turns = fleet.turns
        self.hostlink = fleet.hostlink
        self.bus = bus
        self.budgets = mail.budgets
        self.matrix = identities.matrix
        self.identities = identities

    def __call__(self, req: Any) -> Awaitable[Any]:
        """The handler's coroutine for ``req``, once the gate lets it through."""
        gate(req.cmd, self.name, self.registry.config(self.name))
        return AGENT_TABLE(self, req)

    def tree(self) -> topology.Topology:
        """The agent tree as it is now."""
        return self.topology_store.view()

    def resolve_recipient(self, to: str) -> str:
        """``<parent>`` → the parent (``operator`` for a root); unknown names refused."""
        if to == PARENT_SENTINEL:
            return self.tree().get(self.name) or OPERATOR
        if to == OPERATOR:
            return to
        if not self.registry.exists(to):
            raise NotFound(
                f"unknown recipient {to!r}: no such agent (messages are never dropped "
                "silently); use get_agent_meta or ask your parent for the right name"
            )
        return to

    def self_or_descendant(self, target: str) -> None:
        self.registry.require(target)
        if target != self.name and not topology.is_descendant_of(self.tree(), target, self.name):
            raise PermissionDenied(f"{target} is not you or your descendant (not a descendant)")
