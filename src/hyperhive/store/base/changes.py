"""Wake-ups after a commit: the store's ``on_change`` subscribers."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

__all__ = ["ChangeCallback", "ChangeFeed"]

log = logging.getLogger(__name__)

ChangeCallback = Callable[[str], None]


class ChangeFeed:
    """The ``on_change`` subscribers; backends call :meth:`publish` after commit."""

    def __init__(self) -> None:
        self._callbacks: list[ChangeCallback] = []

    def subscribe(self, callback: ChangeCallback) -> Callable[[], None]:
        self._callbacks.append(callback)

        def unsubscribe() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return unsubscribe

    def publish(self, agents: Iterable[str]) -> None:
        for agent in agents:
            for callback in list(self._callbacks):
                try:
                    callback(agent)
                except Exception:  # one bad subscriber must not starve the others
                    log.exception("store change subscriber failed for %s", agent)
