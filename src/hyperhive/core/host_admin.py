"""Remote agent hosts' credentials, as the operator manages them (``hivectl hosts``)."""

from __future__ import annotations

from hyperhive.core.hostlink import HostLink
from hyperhive.netlink.credentials import hash_secret, new_secret, validate_host_name
from hyperhive.protocol import HostCredential, HostView
from hyperhive.store.base import HostRepo
from hyperhive.store.rows import HostRow

__all__ = ["HostAdmin"]


class HostAdmin:
    def __init__(self, hosts: HostRepo, link: HostLink) -> None:
        self.hosts = hosts
        self.link = link

    def _view(self, row: HostRow) -> HostView:
        live = self.link.hosts.get(row.name)
        return HostView(
            name=row.name,
            created_at=row.created_at,
            rotated_at=row.rotated_at,
            revoked=row.revoked,
            last_seen_at=row.last_seen_at,
            connected=live is not None,
            agents=sorted(live.agents) if live is not None else [],
        )

    async def list(self) -> list[HostView]:
        return [self._view(row) for row in await self.hosts.list()]

    async def add(self, name: str) -> HostCredential:
        secret = new_secret()
        await self.hosts.add(validate_host_name(name), hash_secret(secret))
        return HostCredential(name=name, credential=secret)

    async def rotate(self, name: str) -> HostCredential:
        """A new credential; the old one is refused from now on, and a link made with it
        is cut (rotation after a leak must not leave the leaker connected)."""
        secret = new_secret()
        await self.hosts.rotate(name, hash_secret(secret))
        await self.link.cut(name)
        return HostCredential(name=name, credential=secret)

    async def revoke(self, name: str) -> HostView:
        row = await self.hosts.revoke(name)
        await self.link.cut(name)
        return self._view(row)
