"""Each agent's log file: what its processes print, and the harness's own lines.

``logs/agents/<name>.log``, rotated by size (``.1`` … ``.N``) before a write
would grow it past the cap, so a chatty agent cannot fill the disk.
``get_logs`` and ``hivectl logs NAME [-f]`` read it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import BinaryIO

__all__ = ["KEEP", "MAX_BYTES", "AgentLog"]

MAX_BYTES = 10 << 20
KEEP = 3


class AgentLog:
    def __init__(self, path: Path, max_bytes: int = MAX_BYTES, keep: int = KEEP) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.keep = keep

    def rotate_if_needed(self) -> bool:
        """Shift ``.log`` → ``.log.1`` → … when it is over the cap; True if it rotated."""
        try:
            if self.path.stat().st_size < self.max_bytes:
                return False
        except FileNotFoundError:
            return False
        for i in range(self.keep - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{i}")
            if older.exists():
                older.replace(self.path.with_name(f"{self.path.name}.{i + 1}"))
        self.path.replace(self.path.with_name(f"{self.path.name}.1"))
        return True

    def open(self) -> BinaryIO:
        """Open for appending (after rotating), for a child's stdout/stderr."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rotate_if_needed()
        return self.path.open("ab")

    def line(self, text: str) -> None:
        """One timestamped line from the harness itself."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rotate_if_needed()
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(f"{stamp} hyperhive: {text}\n")
