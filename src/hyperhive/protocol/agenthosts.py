"""The operator's agent hosts (``hivectl hosts``): each one's credential, link and
lease, and adding, rotating and revoking credentials."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hyperhive.protocol.base import Req, _Out
from hyperhive.protocol.link import HostCapacity

__all__ = [
    "HostCredential",
    "HostLinkState",
    "HostView",
    "OpHostsAddReq",
    "OpHostsListReq",
    "OpHostsRevokeReq",
    "OpHostsRotateReq",
]


HostLinkState = Literal["connected", "disconnected", "expired", "revoked", "never"]


class HostView(_Out):
    """One row of ``hivectl hosts list``: an agent host's credential, link and lease.

    ``link``: connected; disconnected (its connection dropped but its lease still
    holds its agents); expired (lease gone: its agents are ``lost``); revoked; never
    connected. A local host (``hivectl up``'s, on the unix socket) has no credential
    row: ``remote`` is false and ``created_at`` is when it registered.
    """

    name: str
    created_at: float
    rotated_at: float | None
    revoked: bool
    last_seen_at: float | None
    connected: bool
    agents: list[str]
    remote: bool = True
    link: HostLinkState = "never"
    epoch: int = 0
    last_heartbeat_at: float | None = None
    lease_expires_at: float | None = None
    running_turns: int = 0
    capacity: HostCapacity | None = None
    lost_agents: list[str] = []
    # When its credential stops being accepted (None: never); past it, ``link`` is
    # refused at the handshake and a live link is cut at its next heartbeat.
    credential_expires_at: float | None = None


class HostCredential(_Out):
    """The credential ``hosts add``/``hosts rotate`` print once (only its hash is kept)."""

    name: str
    credential: str
    expires_at: float | None = None


class OpHostsListReq(Req[list[HostView]]):
    cmd: Literal["hosts_list"]


class OpHostsAddReq(Req[HostCredential]):
    cmd: Literal["hosts_add"]
    name: str = Field(min_length=1, max_length=64)
    # When the credential stops being accepted (seconds since the epoch; None: never).
    expires_at: float | None = None


class OpHostsRotateReq(Req[HostCredential]):
    """A new credential (the old one is refused, its link cut), good until ``expires_at``
    (None: for ever, whatever the old one's expiry was)."""

    cmd: Literal["hosts_rotate"]
    name: str
    expires_at: float | None = None


class OpHostsRevokeReq(Req[HostView]):
    """Refuse the host's credential from now on, and cut its live link at once."""

    cmd: Literal["hosts_revoke"]
    name: str
