"""Retry a hive operation until it succeeds, backing off with jitter between failures.

The host's pollers (forge notifications, the Matrix sync loop) run forever
against a service that may be away for minutes: each failure is reported,
then retried after an exponential wait with jitter, so many agents' pollers
never retry in lock-step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import stamina

from hyperhive.errors import HiveError

__all__ = ["until_it_works"]


async def until_it_works(
    once: Callable[[], Awaitable[object]],
    *,
    backoff_max: float,
    on_failure: Callable[[HiveError], None],
) -> None:
    """Call ``once`` until it returns; each ``HiveError`` goes to ``on_failure``, then a wait."""
    async for attempt in stamina.retry_context(
        on=HiveError,
        attempts=None,
        timeout=None,
        wait_initial=min(1.0, backoff_max),
        wait_max=backoff_max,
        wait_jitter=min(1.0, backoff_max),
    ):
        with attempt:
            try:
                await once()
            except HiveError as exc:
                on_failure(exc)
                raise
