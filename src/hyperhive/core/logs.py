"""Log tails the coordinator serves: an agent's own log and the hive's process logs."""

from __future__ import annotations

from pathlib import Path

import anyio

from hyperhive.config import HivePaths
from hyperhive.protocol import HostJournal

__all__ = ["LogTails", "tail_lines"]


def tail_lines(path: Path, lines: int) -> list[str]:
    """The last ``lines`` lines of a file, read from the end (logs can be large)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            block = min(size, max(4096, lines * 200))
            fh.seek(size - block)
            data = fh.read()
    except FileNotFoundError:
        return []
    text = data.decode("utf-8", "replace").splitlines()
    return text[-lines:]


class LogTails:
    """Reads run on a worker thread: a log on a slow disk must not stall the hive."""

    def __init__(self, paths: HivePaths) -> None:
        self.paths = paths

    async def agent(self, agent: str, lines: int) -> list[str]:
        path = self.paths.logs / "agents" / f"{agent}.log"
        return await anyio.to_thread.run_sync(tail_lines, path, lines)

    async def host_journal(self, lines: int) -> HostJournal:
        """The coordinator's and agent host's own logs (as ``hivectl up`` writes them)."""

        def read() -> HostJournal:
            return HostJournal(
                coordinator=tail_lines(self.paths.logs / "coordinator.log", lines),
                host=tail_lines(self.paths.logs / "host.log", lines),
            )

        return await anyio.to_thread.run_sync(read)
