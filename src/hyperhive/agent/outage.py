"""How a host and its agents log a coordinator that is away, and how long they wait.

Every agent of a host redials the coordinator on its own. A warning per attempt
was two lines a second per agent: a host of 1,000 agents wrote 737 MB of log in
27 minutes while its coordinator was down, and spent half a core writing it.
An :class:`Outage` warns once when the coordinator goes, again at most every
``remind`` seconds, and says when it is back; the attempts in between are
debug lines. :func:`redial_delay` spaces one caller's attempts out.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable

__all__ = ["Outage", "redial_delay"]


def redial_delay(failures: int, first: float, most: float) -> float:
    """Seconds before attempt ``failures + 1``: doubling from ``first`` up to ``most``,
    jittered ±40% so a host's agents (and a failover's hosts) do not redial in step."""
    base = min(most, first * 2.0 ** max(0, failures - 1))
    return base * random.uniform(0.6, 1.4)


class Outage:
    """The log lines of one connection's outages (see the module docstring)."""

    def __init__(
        self,
        log: logging.Logger,
        what: str,
        *,
        remind: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self._what = what
        self._remind = remind
        self._clock = clock
        self.since: float | None = None
        self.failures = 0
        self._told = 0.0

    def failed(self, reason: object) -> None:
        """An attempt failed: a warning if the outage is new or a reminder is due."""
        now = self._clock()
        self.failures += 1
        if self.since is None:
            self.since = self._told = now
            self._log.warning("%s: %s; retrying", self._what, reason)
        elif self._remind is not None and now - self._told >= self._remind:
            self._told = now
            self._log.warning(
                "%s: still away after %.0f s (%d attempts): %s; retrying",
                self._what,
                now - self.since,
                self.failures,
                reason,
            )
        else:
            self._log.debug("%s: %s; retrying", self._what, reason)

    def ended(self) -> None:
        """Connected again: one line for the outage, if there was one."""
        if self.since is not None:
            self._log.info(
                "%s: back after %.1f s (%d failed attempts)",
                self._what,
                self._clock() - self.since,
                self.failures,
            )
        self.since = None
        self.failures = 0
