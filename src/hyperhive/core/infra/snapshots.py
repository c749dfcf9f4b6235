"""The coordinator's side of agent snapshots: hosts upload an agent's snapshot in
chunks and commit it into the store; a replacement's host reads it back.

Hosts hold no database credentials, so the store is written here. Each request
is a host's (the link connection's, never the body's), and is refused unless
that host holds the agent now at the incarnation it names. An upload is kept
in memory until its commit, bounded by hive.toml's ``snapshot_max_bytes``; the
commit checks size and SHA-256 and replaces the agent's snapshot in one row,
so a half-sent one never replaces the previous.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
from dataclasses import dataclass, field

from hyperhive.core.infra.notify import EventBus
from hyperhive.errors import InvalidRequest
from hyperhive.protocol import (
    SNAPSHOT_CHUNK,
    LinkSnapshotCommitReq,
    LinkSnapshotGetReq,
    LinkSnapshotPutReq,
    SnapshotChunk,
    SnapshotStored,
)
from hyperhive.store.base import SnapshotRepo
from hyperhive.store.rows import SnapshotHead, StoredSnapshot

__all__ = ["SnapshotIntake"]

log = logging.getLogger(__name__)


@dataclass
class _Upload:
    incarnation: int
    data: bytearray = field(default_factory=bytearray)


class SnapshotIntake:
    """Receives hosts' snapshots into ``repo`` and serves them back (see module).

    Callers (the link's handlers) have already checked that the host holds the agent.
    """

    def __init__(self, repo: SnapshotRepo, max_bytes: int, bus: EventBus) -> None:
        self.repo = repo
        self.max_bytes = max_bytes
        self.bus = bus
        self._uploads: dict[tuple[str, str], _Upload] = {}
        # What a host is reading now, so a restore reads the row once, not per chunk.
        self._reading: dict[tuple[str, str], StoredSnapshot] = {}

    def _refuse_size(self, agent: str, size: int, what: str) -> None:
        if size > self.max_bytes:
            self.bus.emit("snapshot_refused", agent=agent, size=size, limit=self.max_bytes)
            raise InvalidRequest(
                f"{agent}'s snapshot refused: {what} {size:,} bytes, over this coordinator's "
                f"snapshot_max_bytes ({self.max_bytes:,}); its previous snapshot is kept"
            )

    async def put(self, host: str, req: LinkSnapshotPutReq) -> None:
        key = (host, req.agent)
        try:
            data = base64.b64decode(req.data, validate=True)
        except binascii.Error as exc:
            raise InvalidRequest(f"{req.agent}'s snapshot chunk is not base64: {exc}") from None
        if req.offset == 0:
            self._uploads[key] = _Upload(req.incarnation)
        upload = self._uploads.get(key)
        if upload is None or upload.incarnation != req.incarnation:
            raise InvalidRequest(f"no snapshot upload of {req.agent} started at this incarnation")
        if req.offset != len(upload.data):
            del self._uploads[key]
            raise InvalidRequest(
                f"{req.agent}'s snapshot chunk at {req.offset}, expected {len(upload.data)}: "
                "the upload is dropped; send it again from 0"
            )
        if len(upload.data) + len(data) > self.max_bytes:
            del self._uploads[key]
            self._refuse_size(req.agent, len(upload.data) + len(data), "more than")
        upload.data += data

    async def commit(self, host: str, req: LinkSnapshotCommitReq) -> SnapshotStored:
        upload = self._uploads.pop((host, req.agent), None)
        if upload is None or upload.incarnation != req.incarnation:
            raise InvalidRequest(f"no snapshot upload of {req.agent} to commit")
        data = bytes(upload.data)
        if len(data) != req.size or hashlib.sha256(data).hexdigest() != req.sha256:
            raise InvalidRequest(
                f"{req.agent}'s snapshot arrived with {len(data)} bytes that do not match its "
                "size and SHA-256; the previous snapshot is kept"
            )
        self._refuse_size(req.agent, req.raw_bytes, "its files hold")
        head = SnapshotHead(
            agent=req.agent,
            host=host,
            taken_at=req.taken_at,
            sha256=req.sha256,
            size=req.size,
            raw_bytes=req.raw_bytes,
            files=req.files,
        )
        await self.repo.put(StoredSnapshot(head, data))
        log.debug("%s: snapshot of %d bytes from %s kept", req.agent, req.size, host)
        return SnapshotStored(size=req.size, taken_at=req.taken_at)

    async def get(self, host: str, req: LinkSnapshotGetReq) -> SnapshotChunk:
        key = (host, req.agent)
        held = self._reading.get(key) if req.offset else None
        if held is None:
            held = await self.repo.get(req.agent)
            if held is None:
                self._reading.pop(key, None)
                return SnapshotChunk(size=0)
            self._reading[key] = held
        end = min(req.offset + SNAPSHOT_CHUNK, len(held.data))
        if end >= len(held.data):
            self._reading.pop(key, None)  # its last chunk: read through
        return SnapshotChunk(
            size=len(held.data),
            sha256=held.head.sha256,
            offset=req.offset,
            data=base64.b64encode(held.data[req.offset : end]).decode(),
        )

    def host_gone(self, host: str) -> None:
        """Drop what ``host`` was sending or reading (its link ended)."""
        for book in (self._uploads, self._reading):
            for key in [k for k in book if k[0] == host]:
                del book[key]
