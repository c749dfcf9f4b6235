"""Token buckets: a few actions at once, then a steady trickle. Pure: the caller
passes the time, so a test decides what "a minute later" is."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

__all__ = ["Bucket", "RateLimiter"]


@dataclass(frozen=True)
class Bucket:
    """``tokens`` left at time ``at``."""

    tokens: float
    at: float

    def take(self, now: float, capacity: float, per_second: float) -> tuple[Bucket, float]:
        """The bucket after taking one token at ``now``, and ``0.0``; or, with no token
        to take, the bucket as it is and how many seconds until there is one."""
        tokens = min(capacity, self.tokens + max(0.0, now - self.at) * per_second)
        if tokens >= 1.0:
            return Bucket(tokens - 1.0, now), 0.0
        return Bucket(tokens, now), (1.0 - tokens) / per_second


class RateLimiter:
    """One bucket per key, each ``capacity`` tokens refilled at ``per_minute``."""

    def __init__(self, capacity: int, per_minute: float) -> None:
        if capacity < 1 or per_minute <= 0:
            raise ValueError("a rate limit needs a capacity of 1 or more and a positive rate")
        self.capacity = capacity
        self.per_minute = per_minute
        self._buckets: dict[Hashable, Bucket] = {}

    def take(self, key: Hashable, now: float) -> float:
        """Take a token for ``key`` at ``now`` (monotonic seconds): ``0.0`` if allowed,
        else the seconds until the next one."""
        bucket = self._buckets.get(key) or Bucket(float(self.capacity), now)
        self._buckets[key], wait = bucket.take(now, self.capacity, self.per_minute / 60.0)
        return wait
