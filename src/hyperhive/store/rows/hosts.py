"""A remote agent host's credential and lease."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HostRow"]


@dataclass(frozen=True, slots=True)
class HostRow:
    """A remote agent host's credential record: only a hash of its secret is kept."""

    name: str
    secret_hash: str
    created_at: float
    rotated_at: float | None = None
    revoked_at: float | None = None
    last_seen_at: float | None = None
    # The lease (``hyperhive.netlink.lease``): the latest link epoch and its expiry, the
    # last heartbeat, and the capacity it reported (JSON of ``HostCapacity``).
    epoch: int = 0
    lease_expires_at: float | None = None
    heartbeat_at: float | None = None
    capacity: str | None = None
    # When its credential stops being accepted (None: never).
    expires_at: float | None = None
    # The link epoch whose lease expiry was handled (agents ``lost``, operator told).
    lost_epoch: int | None = None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def expired(self, now: float) -> bool:
        """Whether its credential is past its expiry."""
        return self.expires_at is not None and self.expires_at <= now
