"""Following a stream until Ctrl-C: ``inbox --follow``, ``activity -f``, ``logs -f``.

Each step is one long-poll on the operator socket that answers with what is
new and where to go on from; nothing is buffered for a slow reader. Ctrl-C
(and a reader that went away: ``| head``) ends the command cleanly, exit 0.
An error ends it with its class's exit code, saying what stopped.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from hyperhive.errors import HiveError

__all__ = ["follow"]

C = TypeVar("C")


def follow(what: str, cursor: C, step: Callable[[C], Awaitable[C]]) -> None:
    """Run ``cursor = await step(cursor)`` until Ctrl-C or a closed stdout."""

    async def loop() -> None:
        nonlocal cursor
        while True:
            try:
                cursor = await step(cursor)
            except HiveError as exc:
                raise type(exc)(f"stopped following {what}: {exc.message}") from exc

    try:
        anyio.run(loop)
    except KeyboardInterrupt:
        return
    except BrokenPipeError:
        # The reader is gone (`| head`): quietly, and no second error when Python
        # flushes stdout on the way out.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
