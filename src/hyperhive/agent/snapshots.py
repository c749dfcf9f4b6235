"""An agent's snapshots on its host: after each turn, its durable state to the store
(through the coordinator, over the host link); on a replacement, the last one back.

Whole archive, not per-file deltas: each turn changes claude's session file,
by far the largest part, so per-file deltas would save only the notes that did
not change, at the cost of a manifest to reconcile and a restore assembled from
many rows. One archive per agent, replaced in one row, makes "the previous
snapshot is kept" hold by construction. Each file's SHA-256 still decides
whether anything changed: a turn that changed nothing sends nothing.

Taken off the turn's path: the harness only says a turn ended
(:meth:`AgentSnapshots.turn_ended`); a task of the activation collects, packs
and uploads, coalescing turns that end while it works. A host lost mid-upload
costs the turn in flight: the store keeps the previous snapshot.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import anyio

from hyperhive.agent.agentlog import AgentLog
from hyperhive.agent.events import EventsBus
from hyperhive.agent.snapshotfiles import SnapshotTooBig, collect, pack, unpack
from hyperhive.agent.spec import AgentSpec
from hyperhive.client import RpcClient
from hyperhive.errors import HiveError, Unavailable
from hyperhive.protocol import (
    SNAPSHOT_CHUNK,
    LinkSnapshotCommitReq,
    LinkSnapshotGetReq,
    LinkSnapshotPutReq,
)

__all__ = ["AgentSnapshots", "LinkSnapshots", "Packed", "SnapshotLink", "restore"]

log = logging.getLogger(__name__)

# A graceful stop waits this long for the last turn's snapshot.
FLUSH_SECONDS = 30.0
RESTORE_RETRY_MAX = 10.0
RESTORE_FLOOR = 64 << 20


@dataclass(frozen=True)
class Packed:
    """A snapshot ready to send."""

    data: bytes
    raw_bytes: int
    files: int
    taken_at: float

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


class SnapshotLink(Protocol):
    """Where snapshots go and come from (the coordinator, over the host link)."""

    async def upload(self, spec: AgentSpec, packed: Packed) -> None: ...

    async def download(self, spec: AgentSpec) -> bytes | None: ...


class LinkSnapshots:
    """:class:`SnapshotLink` over the host's link to the coordinator, in chunks."""

    def __init__(self, link: Callable[[], RpcClient | None]) -> None:
        self._link = link

    def _rpc(self) -> RpcClient:
        link = self._link()
        if link is None:
            raise Unavailable("the coordinator link is down")
        return link

    async def upload(self, spec: AgentSpec, packed: Packed) -> None:
        incarnation = spec.incarnation or 0
        data = packed.data
        for offset in range(0, max(len(data), 1), SNAPSHOT_CHUNK):
            chunk = data[offset : offset + SNAPSHOT_CHUNK]
            await self._rpc().call(
                LinkSnapshotPutReq(
                    cmd="snapshot_put",
                    agent=spec.name,
                    incarnation=incarnation,
                    offset=offset,
                    data=base64.b64encode(chunk).decode(),
                )
            )
        await self._rpc().call(
            LinkSnapshotCommitReq(
                cmd="snapshot_commit",
                agent=spec.name,
                incarnation=incarnation,
                size=len(data),
                sha256=packed.sha256,
                raw_bytes=packed.raw_bytes,
                files=packed.files,
                taken_at=packed.taken_at,
            )
        )

    async def download(self, spec: AgentSpec) -> bytes | None:
        parts: list[bytes] = []
        offset, size, sha = 0, None, None
        while size is None or offset < size:
            chunk = await self._rpc().call(
                LinkSnapshotGetReq(
                    cmd="snapshot_get",
                    agent=spec.name,
                    incarnation=spec.incarnation or 0,
                    offset=offset,
                )
            )
            if chunk.sha256 is None:
                return None  # none kept: the agent starts fresh
            if sha is not None and chunk.sha256 != sha:
                # A new snapshot landed between two chunks: start over on it.
                parts, offset, size, sha = [], 0, None, None
                continue
            size, sha = chunk.size, chunk.sha256
            data = base64.b64decode(chunk.data)
            if not data and offset < size:
                raise Unavailable(f"{spec.name}'s snapshot ended early at byte {offset}")
            parts.append(data)
            offset += len(data)
        blob = b"".join(parts)
        if hashlib.sha256(blob).hexdigest() != sha:
            raise Unavailable(f"{spec.name}'s snapshot did not arrive intact (SHA-256 differs)")
        return blob


class AgentSnapshots:
    """One agent's snapshots on its host (see module): built in ``activated``."""

    def __init__(
        self,
        spec: Callable[[], AgentSpec],
        bus: EventsBus,
        link: SnapshotLink | None,
    ) -> None:
        self._spec = spec
        self._bus = bus
        self._link = link
        self._due = anyio.Event()
        self._idle = anyio.Event()
        self._idle.set()
        # The file hashes of the last snapshot the store took (None: none sent yet here).
        self._sent: dict[str, str] | None = None
        self.taken = 0  # snapshots the store took from this activation

    @property
    def enabled(self) -> bool:
        return self._link is not None and self._spec().hive.snapshot_max_bytes > 0

    def turn_ended(self) -> None:
        """A turn (or compaction) ended: snapshot soon, off the turn's path."""
        if self.enabled:
            self._idle = anyio.Event() if self._idle.is_set() else self._idle
            self._due.set()

    async def run(self) -> None:
        """Take a snapshot after each turn end told (turns ending meanwhile: one more)."""
        while True:
            await self._due.wait()
            self._due = anyio.Event()
            try:
                await self.take()
            finally:
                if not self._due.is_set():
                    self._idle.set()

    async def flush(self, within: float = FLUSH_SECONDS) -> None:
        """Wait (at most ``within``) for the snapshot of the last turn told."""
        with anyio.move_on_after(within):
            await self._idle.wait()

    async def take(self) -> bool:
        """Snapshot now if anything changed since the last one; True if the store took
        one. A refusal (too big) or a failure is logged and told; the store keeps the
        previous snapshot."""
        spec = self._spec()
        if self._link is None:
            return False
        limit = spec.hive.snapshot_max_bytes
        started = time.perf_counter()
        try:
            collected = await anyio.to_thread.run_sync(collect, spec, limit)
        except SnapshotTooBig as exc:
            log.warning("%s", exc.message)
            AgentLog(spec.log_file).line(exc.message)
            self._bus.emit("snapshot_refused", size=exc.size, limit=exc.limit, reason=exc.message)
            return False
        hashes = collected.hashes()
        if hashes == self._sent:
            return False
        data = await anyio.to_thread.run_sync(pack, collected)
        packed = Packed(data, collected.raw_bytes, len(collected.files), time.time())
        try:
            await self._link.upload(spec, packed)
        except HiveError as exc:
            log.warning("%s: snapshot not sent (the previous one is kept): %s", spec.name, exc)
            return False
        self._sent = hashes
        self.taken += 1
        seconds = time.perf_counter() - started
        if collected.skipped:
            log.info(
                "%s: snapshot skipped %d link(s) or special file(s), never followed: %s",
                spec.name,
                len(collected.skipped),
                ", ".join(collected.skipped[:5]),
            )
        self._bus.emit(
            "snapshot",
            size=len(data),
            raw_bytes=packed.raw_bytes,
            files=packed.files,
            seconds=round(seconds, 4),
        )
        return True


async def restore(
    spec: AgentSpec, owner: tuple[int, int] | None, link: SnapshotLink, stopping: anyio.Event
) -> bool:
    """Write the agent's last snapshot into its directories here (a replacement, before
    its first turn); False if none is kept. The coordinator being away is waited out
    (until ``stopping``): starting fresh would replace the snapshot with nothing. An
    unusable snapshot (unsafe, corrupt) raises ``StorageError`` with nothing written."""
    delay = 0.5
    while True:
        try:
            blob = await link.download(spec)
            break
        except Unavailable as exc:
            log.warning("%s: cannot fetch its snapshot yet (retrying): %s", spec.name, exc)
            with anyio.move_on_after(delay):
                await stopping.wait()
            if stopping.is_set():
                raise
            delay = min(delay * 2, RESTORE_RETRY_MAX)
    if blob is None:
        log.info("%s: no snapshot kept; it starts fresh on this host", spec.name)
        return False
    # This host's bound, but never below the default: a host configured smaller (or with
    # snapshots off) still restores what the store kept; the bound stops only a bomb.
    limit = max(spec.hive.snapshot_max_bytes, RESTORE_FLOOR)
    files, size = await anyio.to_thread.run_sync(unpack, blob, spec, owner, limit)
    log.info("%s: restored its snapshot (%d files, %d bytes)", spec.name, files, size)
    AgentLog(spec.log_file).line(f"restored its snapshot on this host: {files} files, {size} bytes")
    return True
