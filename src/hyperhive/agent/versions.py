"""What this agent host runs: its hyperhive, and the claude its agents' turns spawn.

Each turn spawns the claude found at start again, so a claude upgraded in
place (``hivectl install-claude``, an npm update, a new ``claude_bin``
target) changes what the host runs under agents that started on the old one.
The file is looked at (one ``stat``) at each ask; ``claude --version`` runs
again only when the file changed.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio

import hyperhive
from hyperhive.claudebin import claude_version
from hyperhive.protocol import Versions

__all__ = ["HostVersions"]

_Signature = tuple[str, int, int, int, int] | None


def _signature(path: Path) -> _Signature:
    """Which file ``path`` is now (a replaced file or a moved link differs)."""
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return None
    return (real, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class HostVersions:
    """This host's :class:`~hyperhive.protocol.Versions`, claude's re-read when it changed."""

    def __init__(self, claude: Path | None) -> None:
        self._claude = claude
        self._seen: _Signature = None
        self._claude_version: str | None = None
        self._lock = anyio.Lock()

    async def current(self) -> Versions:
        async with self._lock:
            if self._claude is not None:
                signature = _signature(self._claude)
                if signature != self._seen:
                    path = self._claude
                    self._claude_version = await anyio.to_thread.run_sync(
                        lambda: claude_version(path)
                    )
                    self._seen = signature
        return Versions(hive=hyperhive.__version__, claude=self._claude_version)
