"""The synchronous wait: poll a condition under a deadline (no bare sleeps).

A leaf module, so any support module may use it (``procs`` re-exports it). The
async waits are :func:`tests.support.surfaces.until` and ``until_async``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["wait_until"]

_T = TypeVar("_T")


def wait_until(check: Callable[[], _T], within: float = 30.0, what: str = "condition") -> _T:
    """Poll ``check`` until it returns something truthy; ``TimeoutError`` past the deadline."""
    deadline = time.monotonic() + within
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not met within {within:.0f}s")
        time.sleep(0.05)
