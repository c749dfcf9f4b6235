"""A host's link ending, its lease expiring, or the operator cutting it: which agents
stop running, which are ``lost``, and who is told (``HostEvents.host_lost``).

When a local host's connection ends, every agent it ran is no longer running.
A remote host holds a lease (``hyperhive.netlink.lease``) that its heartbeats
renew: its connection dropping leaves its agents placed until the lease
expires, so a host that redials in time keeps them; past it they are
``lost``, and a returning host is fenced by its link epoch.
"""

from __future__ import annotations

import logging
import time

import anyio

from hyperhive.core.infra.linked_host import LinkBook, LinkedHost, TurnState
from hyperhive.errors import HiveError
from hyperhive.names import listed
from hyperhive.netlink import lease
from hyperhive.protocol import DeactivateCmd, encode

__all__ = ["HostLoss"]

log = logging.getLogger(__name__)


class HostLoss(LinkBook):
    """The link's book, with hosts leaving it: ended, expired, cut, and fenced."""

    async def _fence(self, host: LinkedHost, agent: str) -> None:
        why = (
            f"agent host {host.host_id}'s lease expired while it held {agent}"
            if self.lost.get(agent) == host.host_id
            else f"agent host {host.host_id} does not hold {agent} any more"
        )
        log.warning("fencing %s on agent host %s: %s", agent, host.host_id, why)
        try:
            await host.push(
                encode(DeactivateCmd(cmd="deactivate", agent=agent, graceful=False, fenced=why))
            )
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # gone again: it is told when it next registers

    async def cut(self, host_id: str) -> bool:
        """End a host's link now (its credential was revoked): its agents stop running."""
        away = self.absent.pop(host_id, None)
        if away is not None:  # no connection to end: its agents stop now
            away.cut = True
            await self._drop(away, lease_expired=False)
            return True
        host = self.hosts.get(host_id)
        if host is None:
            return False
        log.warning("cutting agent host %s's link", host_id)
        host.cut = True
        if host.stream is not None:
            await host.stream.aclose()
        with anyio.move_on_after(10):  # its agents are marked stopped once the reader sees it
            await host.gone.wait()
        return True

    async def expire_leases(self, now: float | None = None) -> list[str]:
        """Drop every remote host whose lease is over; return their names. A host still
        connected but silent (a partition) has its link ended too."""
        now = time.time() if now is None else now
        over = [h for h in self.all_hosts().values() if lease.expired(h.lease_expires, now)]
        for host in over:
            log.warning(
                "agent host %s's lease expired (last heard %.1fs ago)",
                host.host_id,
                now - host.last_heard,
            )
            self.absent.pop(host.host_id, None)
            if self.hosts.get(host.host_id) is host:
                del self.hosts[host.host_id]
                if host.end is not None:
                    host.end.cancel()  # a partitioned link: its frames no longer count
            await self._drop(host, lease_expired=True)
        return [h.host_id for h in over]

    async def watch_leases(self) -> None:
        """Expire leases for ever (a fifth of a lease late at most)."""
        while True:
            await anyio.sleep(min(1.0, self.lease_seconds / 5))
            try:
                await self.expire_leases()
            except HiveError as exc:  # telling someone failed: the watch goes on
                log.error("while expiring host leases: %s", exc)

    async def _ended(self, host: LinkedHost) -> None:
        """A host's connection ended: a remote host inside its lease keeps its agents."""
        if self.hosts.get(host.host_id) is not host:
            return  # superseded by its own new link, or its lease already expired
        del self.hosts[host.host_id]
        # Whatever was asked of it on this connection has no one to answer now.
        self.calls.host_gone(host.host_id)
        if self.snapshots is not None:
            self.snapshots.host_gone(host.host_id)
        if (
            host.remote
            and not host.leaving
            and not host.cut
            and not lease.expired(host.lease_expires, time.time())
        ):
            self.absent[host.host_id] = host
            log.warning(
                "agent host %s's link dropped; it holds %s until its lease expires",
                host.host_id,
                listed(sorted(host.agents), empty="no agents"),
            )
            self.bus.emit("host", host=host.host_id, connected=False)
            return
        await self._drop(host, lease_expired=False)

    async def _drop(self, host: LinkedHost, lease_expired: bool) -> None:
        gone = sorted(host.agents)
        for agent in gone:
            self.placement.pop(agent, None)
            self.incarnations.pop(agent, None)
            self._apis.pop(agent, None)
            self.turns[agent] = TurnState("stopped")
            if lease_expired:
                self.lost[agent] = host.host_id
            self.bus.emit("agent", agent=agent, running=False, lost=lease_expired)
        host.agents.clear()
        self.calls.host_gone(host.host_id)
        for agent, (holder, _) in list(self.draining.items()):
            if holder == host.host_id:
                del self.draining[agent]
        host.gone.set()
        log.warning(
            "agent host %s %s; not running now: %s",
            host.host_id,
            "is lost (lease expired)" if lease_expired else "went away",
            listed(gone),
        )
        self.bus.emit("host", host=host.host_id, connected=False)
        if host.leaving:
            return
        if lease_expired and not await self._first_to_lose(host):
            log.info(
                "agent host %s's loss at link epoch %d was handled before (a previous "
                "coordinator): its agents show lost, nobody is told again",
                host.host_id,
                host.epoch,
            )
            return
        await self.events.host_lost(host.host_id, gone, lease_expired)

    async def _first_to_lose(self, host: LinkedHost) -> bool:
        """Record durably that this lease expiry is handled, before anyone is told: a
        coordinator taking over after a failover then neither forgets nor repeats it."""
        if not host.remote or self.leases is None:
            return True
        try:
            return await self.leases.claim_loss(host.host_id, host.epoch)
        except HiveError as exc:  # the store is away: telling twice beats never
            log.warning("could not record agent host %s's loss: %s", host.host_id, exc)
            return True
