"""What the coordinator knows of each agent host on its link, and each agent's turn."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import anyio

from hyperhive.protocol import HostCapacity
from hyperhive.streams import ByteStream

__all__ = ["LinkedHost", "TurnState"]


@dataclass
class TurnState:
    state: str = "stopped"
    since: float = field(default_factory=time.time)
    needs_login: bool = False


@dataclass
class LinkedHost:
    host_id: str
    stream: ByteStream
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    agents: set[str] = field(default_factory=set)
    leaving: bool = False
    claude_slots: int | None = None
    gone: anyio.Event = field(default_factory=anyio.Event)
    remote: bool = False  # dialled the network link: it holds a lease
    epoch: int = 0
    registered_at: float = field(default_factory=time.time)
    heartbeat_at: float | None = None
    lease_expires: float | None = None  # None: no lease (a local host)
    capacity: HostCapacity | None = None
    cut: bool = False  # its link was ended on purpose (revoked): no grace
    # Ends its connection (reader and forwards in flight) when it is fenced.
    end: anyio.CancelScope | None = None
    reported: set[str] = field(default_factory=set)  # what it ran when it registered

    @property
    def last_heard(self) -> float:
        return self.heartbeat_at or self.registered_at

    async def push(self, data: bytes) -> None:
        async with self.lock:
            await self.stream.send(data)
