"""An agent's last snapshot, its head and whole."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SnapshotHead", "StoredSnapshot"]


@dataclass(frozen=True, slots=True)
class SnapshotHead:
    """What an agent's last snapshot is, without its bytes: for views and change checks."""

    agent: str
    host: str  # the host that sent it
    taken_at: float
    sha256: str  # of the compressed archive
    size: int  # compressed bytes
    raw_bytes: int  # the files' total size, uncompressed
    files: int


@dataclass(frozen=True, slots=True)
class StoredSnapshot:
    """An agent's last snapshot (its ``state/`` and claude session, a gzip'd tar), whole."""

    head: SnapshotHead
    data: bytes
