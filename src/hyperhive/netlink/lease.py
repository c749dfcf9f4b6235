"""Host leases: when a host's agents are its own, and what a returning host must stop.

Pure module: no I/O. A remote host renews its lease with a heartbeat every
third of ``lease_seconds``; a connection that drops does not end the lease, so
a host that redials within it keeps its agents without a restart. Once the
lease expires the host's agents are ``lost`` and the host is *fenced*: the
link epoch it registered with is over, and whatever it still runs for an
agent it no longer holds must stop without acking anything (Kubernetes' node
lease and a Raft leader's term, in one small rule).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "HEARTBEATS_PER_LEASE",
    "HeldLease",
    "Restored",
    "expired",
    "fenced_agents",
    "heartbeat_seconds",
    "restore",
    "silent",
]

# Two missed heartbeats still leave a third inside the lease.
HEARTBEATS_PER_LEASE = 3


def heartbeat_seconds(lease_seconds: float) -> float:
    return lease_seconds / HEARTBEATS_PER_LEASE


def expired(lease_expires_at: float | None, now: float) -> bool:
    """Whether a lease is over (``None``: the host has none — a local host, whose
    socket to the coordinator is its life)."""
    return lease_expires_at is not None and lease_expires_at <= now


def silent(last_heard: float, lease_seconds: float, now: float) -> bool:
    """Whether a connected host has missed two heartbeats: a new registration under its
    name (the same host redialling after a partition) may then take its place."""
    return now - last_heard > 2 * heartbeat_seconds(lease_seconds)


def fenced_agents(
    host: str,
    reported: Collection[str],
    placement: Mapping[str, str],
    lost: Mapping[str, str],
) -> list[str]:
    """Of the agents ``host`` says it runs, those it must stop *now*, before anything
    is activated: the ones lost with it (their incarnation there is over; with
    ``on_host_loss = "wait"`` they start again on it as a new one) and the ones
    placed on another host meanwhile.

    An agent the coordinator knows nothing against (it restarted, or failed over)
    is not fenced here: it is adopted by its next activation.
    """
    return sorted(a for a in reported if lost.get(a) == host or placement.get(a, host) != host)


@dataclass(frozen=True, slots=True)
class HeldLease:
    """A remote host's lease as the store keeps it (what a new coordinator reads)."""

    host: str
    epoch: int
    expires_at: float | None
    lost_epoch: int | None = None
    revoked: bool = False


@dataclass(frozen=True, slots=True)
class Restored:
    """What a coordinator taking over (a restart, a failover) must hold of a previous
    one's hosts before any of them dials in."""

    # Host -> its agents, held until the stored lease expires (then they are lost, and
    # that is news: the operator is told, ``replace`` applies).
    away: dict[str, HeldLease] = field(default_factory=dict)
    holds: dict[str, list[str]] = field(default_factory=dict)
    # Agent -> the host it was already lost with (the loss is old news: nobody is told).
    lost: dict[str, str] = field(default_factory=dict)


def restore(
    leases: Iterable[HeldLease], assigned: Mapping[str, str], desired: Collection[str]
) -> Restored:
    """From the stored leases and placements (``assigned``: agent -> host, agents mid-move
    left out) and the agents that should run: which hosts still hold agents under a lease
    and which agents are already lost.

    A host whose link epoch's loss was handled (``lost_epoch == epoch``) holds nothing:
    its agents are lost with it. A revoked host holds nothing either (its agents stopped
    when it was cut). A host that never registered (epoch 0) has no lease.
    """
    out = Restored()
    by_host: dict[str, list[str]] = {}
    for agent, host in sorted(assigned.items()):
        if agent in desired:
            by_host.setdefault(host, []).append(agent)
    for held in leases:
        if held.revoked or held.epoch <= 0 or held.expires_at is None:
            continue
        agents = by_host.get(held.host, [])
        if held.lost_epoch == held.epoch:
            for agent in agents:
                out.lost[agent] = held.host
            continue
        out.away[held.host] = held
        out.holds[held.host] = agents
    return out
