"""Which agent host a new agent goes to: the placement rules, as pure functions.

Pure module: no I/O. A host's capacity is its claude slots (concurrent turns),
an optional cap on the agents it takes, and its free memory when it reports
it; :func:`capacity_of` is the one place that reads those from what a host
said (its registration now, its heartbeat once it sends one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["TURN_MEMORY", "HostLoad", "capacity_of", "choose_host", "has_room"]

# Memory one more claude turn needs (measured 170–275 MB): a host with less free
# takes no new agent.
TURN_MEMORY = 300 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class HostLoad:
    """A live host as placement sees it."""

    name: str
    slots: int  # concurrent claude turns it runs (at least 1)
    agents: int  # agents assigned to it
    max_agents: int | None = None  # the most it takes (None: no cap)
    memory_free: int | None = None  # bytes available (None: not reported)


def capacity_of(
    name: str,
    reported: Mapping[str, int | None],
    agents: int,
) -> HostLoad:
    """``name``'s load from what it reported (``claude_slots``, ``max_agents``,
    ``memory_free``; a heartbeat's newer figures simply replace the registration's)."""
    slots = reported.get("claude_slots")
    return HostLoad(
        name=name,
        slots=max(1, slots or 1),
        agents=agents,
        max_agents=reported.get("max_agents"),
        memory_free=reported.get("memory_free"),
    )


def has_room(host: HostLoad) -> bool:
    """May ``host`` take one more agent?"""
    if host.max_agents is not None and host.agents >= host.max_agents:
        return False
    return host.memory_free is None or host.memory_free >= TURN_MEMORY


def _load(host: HostLoad) -> tuple[float, int, str]:
    # Agents per claude slot; ties to the emptier, then by name (deterministic).
    return (host.agents / host.slots, host.agents, host.name)


def choose_host(hosts: Sequence[HostLoad], parent_host: str | None = None) -> str | None:
    """The host for a new agent: its parent's if that one is live and has room (a
    parent and its children together), else the least loaded live host with room;
    ``None`` when no live host has room."""
    roomy = [h for h in hosts if has_room(h)]
    if not roomy:
        return None
    if parent_host is not None and any(h.name == parent_host for h in roomy):
        return parent_host
    return min(roomy, key=_load).name
