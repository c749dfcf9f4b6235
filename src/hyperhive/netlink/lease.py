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

from collections.abc import Collection, Mapping

__all__ = ["HEARTBEATS_PER_LEASE", "expired", "fenced_agents", "heartbeat_seconds", "silent"]

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
