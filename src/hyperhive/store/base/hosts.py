"""Remote agent hosts, their credentials and link leases."""

from __future__ import annotations

from abc import ABC, abstractmethod

from hyperhive.errors import Conflict, NotFound
from hyperhive.store.rows import HostRow

__all__ = ["HostRepo", "host_missing", "host_taken"]


def host_taken(name: str) -> Conflict:
    return Conflict(
        f"an agent host named {name!r} already exists; `hivectl hosts rotate {name}` "
        "issues it a new credential"
    )


def host_missing(name: str) -> NotFound:
    return NotFound(f"no agent host named {name!r}; `hivectl hosts list` shows them")


class HostRepo(ABC):
    """Remote agent hosts and the hash of each one's credential (never the secret)."""

    @abstractmethod
    async def add(self, name: str, secret_hash: str, expires_at: float | None = None) -> HostRow:
        """Record a new host whose credential is good until ``expires_at`` (``None``:
        for ever). ``Conflict`` if the name is taken (revoked ones included)."""

    @abstractmethod
    async def get(self, name: str) -> HostRow | None: ...

    @abstractmethod
    async def list(self) -> list[HostRow]:
        """Every host, by name."""

    @abstractmethod
    async def rotate(self, name: str, secret_hash: str, expires_at: float | None = None) -> HostRow:
        """Replace the credential (the old one stops working) with one good until
        ``expires_at`` (``None``: for ever); un-revokes. ``NotFound``."""

    @abstractmethod
    async def revoke(self, name: str) -> HostRow:
        """Refuse the host's credential from now on. ``NotFound``."""

    @abstractmethod
    async def seen(self, name: str, at: float) -> None:
        """Note that the host connected at ``at`` (no-op for an unknown name)."""

    @abstractmethod
    async def new_epoch(self, name: str, expires_at: float) -> int:
        """A registration: the host's link epoch + 1 (monotonic, durable) with a fresh
        lease until ``expires_at``; return the new epoch. ``NotFound``."""

    @abstractmethod
    async def renew(
        self, name: str, epoch: int, at: float, expires_at: float, capacity: str
    ) -> bool:
        """A heartbeat of link ``epoch``: extend its lease, keep its capacity. ``False``
        (nothing written) if a newer registration has superseded ``epoch``."""

    @abstractmethod
    async def claim_loss(self, name: str, epoch: int) -> bool:
        """Record that link ``epoch``'s lease expiry is being handled (durably, before
        anyone is told). ``False``: it was recorded before (by this coordinator or one
        before a failover), or ``epoch`` is not the host's latest."""
