"""Agent snapshots over the host link: after a turn the host uploads the agent's
durable state (a gzip'd tar of ``state/`` and its claude session) in chunks and
commits it; a replacement's new host fetches the last one before its first turn.

Every request names the agent and the activation incarnation the host holds it
at: the coordinator accepts it only from the host that holds the agent now (the
node-authorizer rule of ``netlink.authz``), so a fenced or stale host can
neither overwrite an agent's snapshot nor read another host's agent's.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hyperhive.protocol.base import Req, _Out
from hyperhive.protocol.move import MOVE_CHUNK

__all__ = [
    "SNAPSHOT_CHUNK",
    "LinkSnapshotCommitReq",
    "LinkSnapshotGetReq",
    "LinkSnapshotPutReq",
    "SnapshotChunk",
    "SnapshotStored",
]

# Raw bytes per chunk (base64 in the frame): well under the 1 MiB frame default.
SNAPSHOT_CHUNK = MOVE_CHUNK
_SHA = Field(pattern=r"^[0-9a-f]{64}$")
_B64 = Field(max_length=(SNAPSHOT_CHUNK * 4) // 3 + 8)
_AGENT = Field(min_length=1, max_length=64)


class LinkSnapshotPutReq(Req[None]):
    """One chunk of the snapshot being uploaded; ``offset`` 0 starts a new upload."""

    cmd: Literal["snapshot_put"]
    agent: str = _AGENT
    incarnation: int
    offset: int = Field(ge=0)
    data: str = _B64


class SnapshotStored(_Out):
    """The snapshot is the agent's last one now."""

    size: int
    taken_at: float


class LinkSnapshotCommitReq(Req[SnapshotStored]):
    """Every chunk is up: keep the archive (of this size and SHA-256) as the agent's last
    snapshot, in place of the previous one."""

    cmd: Literal["snapshot_commit"]
    agent: str = _AGENT
    incarnation: int
    size: int = Field(ge=0)
    sha256: str = _SHA
    raw_bytes: int = Field(ge=0)  # the files' total, uncompressed
    files: int = Field(ge=0)
    taken_at: float


class SnapshotChunk(_Out):
    """A chunk of the agent's last snapshot; ``size`` 0 with no ``sha256``: none is kept."""

    size: int
    sha256: str | None = None
    offset: int = 0
    data: str = ""


class LinkSnapshotGetReq(Req[SnapshotChunk]):
    """Read the agent's last snapshot from ``offset`` (a replacement restores it)."""

    cmd: Literal["snapshot_get"]
    agent: str = _AGENT
    incarnation: int
    offset: int = Field(default=0, ge=0)
