"""In-process wake-ups and the coordinator's event bus.

``Notifier`` pushes "something changed for agent X" to whoever is long-
polling X's ``wait``; ``EventBus`` fans coordinator events (a reparent, an
agent coming up) out to subscribers such as the dashboard. Both are pushed,
never polled.
"""

from __future__ import annotations

import anyio

from hyperhive.bus import EventBus

__all__ = ["ANY", "EventBus", "Notifier"]  # EventBus re-exported: the shared broadcast


# Fires on a change for any agent (no agent name can be "*"): the dashboard's feed.
ANY = "*"


class Notifier:
    """One generation event per agent, replaced each time it fires."""

    def __init__(self) -> None:
        self._events: dict[str, anyio.Event] = {}

    def event(self, agent: str) -> anyio.Event:
        """The event the next change for ``agent`` will set."""
        ev = self._events.get(agent)
        if ev is None:
            ev = self._events[agent] = anyio.Event()
        return ev

    def notify(self, agent: str) -> None:
        for key in (agent, ANY):
            ev = self._events.pop(key, None)
            if ev is not None:
                ev.set()

    async def wait(self, event: anyio.Event, seconds: float) -> bool:
        """Wait for ``event`` up to ``seconds``; True if it fired."""
        with anyio.move_on_after(max(0.0, seconds)):
            await event.wait()
            return True
        return False
