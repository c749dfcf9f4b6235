"""One activation's lifetime on its host: asked to stop, killed, ended.

The host stops and kills (:meth:`Lifetime.stop`, :meth:`Lifetime.kill`); the
activation says it ended (:meth:`Lifetime.end`). Everyone else waits on the
events, read-only.
"""

from __future__ import annotations

import anyio

__all__ = ["Lifetime"]


class Lifetime:
    """``stopping`` (a graceful stop: finish the turn), ``killed`` (stop now), ``done``."""

    __slots__ = ("_done", "_killed", "_stopping")

    def __init__(self) -> None:
        self._stopping = anyio.Event()
        self._killed = anyio.Event()
        self._done = anyio.Event()

    @property
    def stopping(self) -> anyio.Event:
        """Set once a stop was asked (a kill asks it too); set it with :meth:`stop`."""
        return self._stopping

    @property
    def killed(self) -> anyio.Event:
        """Set once its host cancels it; set it with :meth:`kill`."""
        return self._killed

    @property
    def done(self) -> anyio.Event:
        """Set once it ended on this host, whatever the reason; set it with :meth:`end`."""
        return self._done

    def stop(self) -> None:
        self._stopping.set()

    def kill(self) -> None:
        self._stopping.set()
        self._killed.set()

    def end(self) -> None:
        self._done.set()
