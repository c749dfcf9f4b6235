"""The fleet layer's services, handed to those above it as one group."""

from __future__ import annotations

from dataclasses import dataclass

from hyperhive.core.fleet.agentdisks import AgentDisks
from hyperhive.core.fleet.host_admin import HostAdmin
from hyperhive.core.fleet.hostlink import HostLink
from hyperhive.core.fleet.logs import LogTails
from hyperhive.core.fleet.moves import Mover
from hyperhive.core.fleet.placement import Placement
from hyperhive.core.fleet.turn_records import TurnRecords

__all__ = ["Fleet"]


@dataclass(frozen=True, slots=True)
class Fleet:
    """The agent hosts: their links, placement, moves, and agents' directories, logs and turns."""

    hostlink: HostLink
    placement: Placement
    disks: AgentDisks
    mover: Mover
    logs: LogTails
    host_admin: HostAdmin
    turns: TurnRecords
