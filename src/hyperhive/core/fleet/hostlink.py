"""The link to agent hosts: who runs which agent, and telling them.

``HostLink`` is the link as the services above it see it: its book of hosts and
placements (``core.infra.linked_host.LinkBook``), hosts leaving it
(``host_loss``), their connections served (``link_serving``), and here the
commands pushed to a host (``activate``/``deactivate``/``place``) and the asks
answered by the host holding an agent.
"""

from __future__ import annotations

import logging

import anyio

from hyperhive.core.fleet.link_serving import LinkServing
from hyperhive.core.infra.linked_host import TurnState
from hyperhive.errors import Unavailable
from hyperhive.protocol import (
    ActivateCmd,
    DeactivateCmd,
    MetaChangedAsk,
    PlaceCmd,
    Req,
    encode,
)
from hyperhive.protocol.hostreads import AgentSnapshot, AgentSnapshotAsk
from hyperhive.protocol.steer import InterruptAsk, TurnInterrupted

__all__ = ["HostLink"]

log = logging.getLogger(__name__)

# How long a meta change's reply waits for the host to drop the answer it keeps: the
# change is stored either way; past this a stale get_agent_meta is possible, and logged.
META_FORGET_WITHIN = 5.0
# How long a host has to answer for an agent's turn state.
STATE_WITHIN = 5.0


class HostLink(LinkServing):
    """Serving hosts' connections, and telling them what to run."""

    async def activate(self, cmd: ActivateCmd, host: str | None = None) -> None:
        """Place ``cmd.agent`` on ``host``, else its current one, else the least loaded."""
        if not self.hosts:
            raise Unavailable(
                f"no agent host is connected, so {cmd.agent} cannot start; run `hivectl up` "
                "(or `hivectl host`)"
            )
        host_id = host or self.placement.get(cmd.agent)
        if host_id is not None and host_id not in self.hosts:
            raise Unavailable(
                f"{cmd.agent}'s agent host {host_id} is not connected (its lease holds the "
                "agent until it expires); try again when it is back"
            )
        host_id = host_id or min(self.hosts, key=lambda h: len(self.hosts[h].agents))
        previous = self.all_hosts().get(self.placement.get(cmd.agent, ""))
        if previous is not None and previous.host_id != host_id:
            previous.agents.discard(cmd.agent)
            if previous.host_id in self.hosts:
                # Still running there (a move stops it first): one agent, one runtime.
                await self._fence(previous, cmd.agent)
        target = self.hosts[host_id]
        target.agents.add(cmd.agent)
        self.placement[cmd.agent] = host_id
        self.last_host[cmd.agent] = host_id
        self.incarnations[cmd.agent] = cmd.incarnation
        self.draining.pop(cmd.agent, None)
        self.lost.pop(cmd.agent, None)
        self.turns[cmd.agent] = TurnState("idle")
        await target.push(encode(cmd))
        self.bus.emit("agent", agent=cmd.agent, running=True, host=host_id)

    def serving(self, agent: str) -> str:
        """The connected host ``agent`` runs on (``Unavailable`` if none)."""
        host = self.host_of(agent)
        if host is None:
            raise Unavailable(f"{agent} is not running on any agent host")
        return host

    async def snapshot(self, agent: str) -> AgentSnapshot:
        """``agent``'s authoritative turn state, asked of the host that holds it."""
        return await self.calls.ask(
            self.serving(agent),
            lambda n: AgentSnapshotAsk(cmd="agent_snapshot", ask=n, agent=agent),
            STATE_WITHIN,
            f"{agent}'s turn state",
        )

    async def interrupt(self, agent: str, tell: str | None) -> TurnInterrupted:
        """Interrupt ``agent``'s running turn on the host that holds it (``tell``: then
        give its model that text)."""
        return await self.calls.ask(
            self.serving(agent),
            lambda n: InterruptAsk(cmd="interrupt_turn", ask=n, agent=agent, tell=tell),
            STATE_WITHIN,
            f"an interrupt of {agent}'s turn",
        )

    async def push(self, host_id: str, cmd: Req[None]) -> bool:
        """Push ``cmd`` to ``host_id``; ``False`` if it is not connected (or just went)."""
        host = self.hosts.get(host_id)
        if host is None:
            return False
        try:
            await host.push(encode(cmd))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False
        return True

    async def place(self, cmd: PlaceCmd) -> None:
        """Tell the host running ``cmd.agent`` its new place in the tree (no restart).

        An agent not running now learns it from its next activation.
        """
        host = self.hosts.get(self.placement.get(cmd.agent, ""))
        if host is None:
            return
        try:
            await host.push(encode(cmd))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the host is going; the agent's next activation carries its place

    async def meta_changed(self, agent: str) -> None:
        """Have the host running ``agent`` drop the ``get_agent_meta`` it keeps, and wait
        (bounded) until it has: the agent's next MCP call reaches that host by another
        connection, so a push alone could be overtaken by it."""
        host_id = self.placement.get(agent)
        if host_id is None or host_id not in self.hosts:
            return
        try:
            await self.calls.ask(
                host_id,
                lambda ask: MetaChangedAsk(cmd="meta_changed", agent=agent, ask=ask),
                META_FORGET_WITHIN,
                f"{agent}'s meta change",
            )
        except Unavailable as exc:
            # Gone: its next activation of the agent starts empty. Slow: said, not fatal.
            log.warning("%s's host may still show its old meta: %s", agent, exc.message)

    async def deactivate(self, agent: str, graceful: bool = True) -> bool:
        host_id = self.placement.pop(agent, None)
        incarnation = self.incarnations.pop(agent, None)
        if host_id is None:
            return False
        self._apis.pop(agent, None)
        host = self.all_hosts().get(host_id)
        if host is not None and incarnation is not None:
            self.draining[agent] = (host_id, incarnation)
        self.turns[agent] = TurnState("stopped")
        if host is not None:
            host.agents.discard(agent)
            try:
                await host.push(
                    encode(DeactivateCmd(cmd="deactivate", agent=agent, graceful=graceful))
                )
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
        self.bus.emit("agent", agent=agent, running=False)
        return True
