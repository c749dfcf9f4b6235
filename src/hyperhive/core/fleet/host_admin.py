"""Agent hosts as the operator sees and manages them (``hivectl hosts``, the Hosts page):
remote hosts' credentials, and every host's link, lease, agents, turns and capacity."""

from __future__ import annotations

import time

from hyperhive.core.fleet.hostlink import HostLink
from hyperhive.errors import InvalidRequest
from hyperhive.netlink import lease
from hyperhive.netlink.credentials import hash_secret, new_secret, validate_host_name
from hyperhive.netlink.expiry import when
from hyperhive.protocol import HostCapacity, HostCredential, HostView
from hyperhive.store.base import HostRepo
from hyperhive.store.rows import HostRow

__all__ = ["BUSY", "HostAdmin"]

# Turn states that hold a claude slot (a running turn).
BUSY = frozenset({"thinking", "compacting"})


class HostAdmin:
    def __init__(self, hosts: HostRepo, link: HostLink) -> None:
        self.hosts = hosts
        self.link = link

    def _view(self, row: HostRow | None, name: str, now: float) -> HostView:
        connected = self.link.connected(name)
        held = self.link.all_hosts().get(name)
        expires = held.lease_expires if held is not None else None
        if expires is None and row is not None:
            expires = row.lease_expires_at  # a lease a previous coordinator granted
        if row is not None and row.revoked:
            state = "revoked"
        elif connected:
            state = "connected"
        elif held is not None:
            state = "disconnected"
        elif row is not None and row.epoch > 0:
            state = "expired" if lease.expired(expires, now) or expires is None else "disconnected"
        else:
            state = "never"
        agents = sorted(held.agents) if held is not None else []
        capacity = held.capacity if held is not None else None
        if capacity is None and row is not None and row.capacity:
            capacity = HostCapacity.model_validate_json(row.capacity)
        return HostView(
            name=name,
            created_at=row.created_at if row is not None else held.registered_at if held else now,
            rotated_at=row.rotated_at if row is not None else None,
            revoked=row.revoked if row is not None else False,
            last_seen_at=row.last_seen_at if row is not None else None,
            connected=connected,
            agents=agents,
            remote=row is not None,
            link=state,
            epoch=held.epoch if held is not None else row.epoch if row is not None else 0,
            last_heartbeat_at=(
                held.heartbeat_at
                if held is not None and held.heartbeat_at
                else row.heartbeat_at
                if row is not None
                else None
            ),
            lease_expires_at=expires,
            running_turns=sum(
                1 for a in agents if (t := self.link.turn_of(a)) is not None and t.state in BUSY
            ),
            capacity=capacity,
            lost_agents=sorted(a for a, h in self.link.lost_agents().items() if h == name),
            credential_expires_at=row.expires_at if row is not None else None,
        )

    async def list(self) -> list[HostView]:
        """Every remote host with a credential, and every local host connected now."""
        now = time.time()
        rows = {row.name: row for row in await self.hosts.list()}
        names = sorted(set(rows) | set(self.link.all_hosts()))
        return [self._view(rows.get(name), name, now) for name in names]

    async def add(self, name: str, expires_at: float | None = None) -> HostCredential:
        """A new host whose credential is good until ``expires_at`` (None: for ever)."""
        _check_future(expires_at)
        secret = new_secret()
        await self.hosts.add(validate_host_name(name), hash_secret(secret), expires_at)
        return HostCredential(name=name, credential=secret, expires_at=expires_at)

    async def rotate(self, name: str, expires_at: float | None = None) -> HostCredential:
        """A new credential good until ``expires_at`` (None: for ever); the old one is
        refused from now on, and a link made with it is cut (rotation after a leak must
        not leave the leaker connected)."""
        _check_future(expires_at)
        secret = new_secret()
        await self.hosts.rotate(name, hash_secret(secret), expires_at)
        await self.link.cut(name)
        return HostCredential(name=name, credential=secret, expires_at=expires_at)

    async def revoke(self, name: str) -> HostView:
        row = await self.hosts.revoke(name)
        await self.link.cut(name)
        return self._view(row, name, time.time())


def _check_future(expires_at: float | None) -> None:
    # Checked here too, not only by the CLI: a credential born expired is a mistake.
    if expires_at is not None and expires_at <= time.time():
        raise InvalidRequest(
            f"the credential's expiry {when(expires_at)} is not in the future; give a later "
            "one (or none: it never expires)"
        )
