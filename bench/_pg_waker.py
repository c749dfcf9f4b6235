"""``python -m bench._pg_waker URL``: a second process that sends when told to.

For each line ``<recipient>`` on stdin it stamps ``perf_counter_ns()`` (the
system-wide CLOCK_MONOTONIC on Linux, comparable across processes) into the
body and sends one message through its own PostgreSQL store; it prints
``ready`` once open and ``sent`` after each commit.
"""

from __future__ import annotations

import asyncio
import sys
from time import perf_counter_ns

from hyperhive.store.postgres import open_postgres


async def main(url: str) -> None:
    store = await open_postgres(url)
    loop = asyncio.get_running_loop()
    print("ready", flush=True)
    try:
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                return
            recipient = line.strip()
            await store.messages.send("waker", recipient, str(perf_counter_ns()))
            print("sent", flush=True)
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
