"""What hosts report of an ``agents move`` over the link: the source's upload of the
archive, the target's download, each side's outcome, and the source's drop of its copy.
Each report comes from the host that sent it (the connection's, never the body's)."""

from __future__ import annotations

import base64
import logging

import anyio

from hyperhive.core.fleet.move_book import Move, MoveBook, file_sha, sha
from hyperhive.errors import Conflict, InvalidRequest
from hyperhive.protocol import (
    MOVE_CHUNK,
    LinkMoveDroppedReq,
    LinkMoveGetReq,
    LinkMovePackedReq,
    LinkMovePutReq,
    LinkMoveUnpackedReq,
    MoveChunk,
)
from hyperhive.store.base import PlacementRepo

__all__ = ["MoveIntake"]

log = logging.getLogger(__name__)


class MoveIntake:
    """The link's ``MoveReports``: chunks spooled, checked and handed on, and each
    report settling the move it names in ``book``."""

    def __init__(self, book: MoveBook, assignments: PlacementRepo) -> None:
        self.book = book
        self.assignments = assignments

    async def put(self, host: str, req: LinkMovePutReq) -> None:
        """The source's next chunk of the archive, appended to the spool."""
        m = self.book.of(host, req.agent, req.move_id, "source")
        if m.packed.is_set():
            raise Conflict(f"move {m.move_id}'s upload is already complete")
        if req.offset != m.written:
            raise InvalidRequest(
                f"move {m.move_id}: chunk at offset {req.offset}, expected {m.written}"
            )
        try:
            data = base64.b64decode(req.data, validate=True)
        except ValueError as exc:
            raise InvalidRequest(f"move {m.move_id}: a chunk is not base64: {exc}") from exc
        if len(data) > MOVE_CHUNK or sha(data) != req.sha256:
            raise InvalidRequest(f"move {m.move_id}: a chunk fails its checksum; resend it")

        def append() -> None:
            with m.spool.open("ab") as f:
                f.write(data)

        await anyio.to_thread.run_sync(append)
        m.written += len(data)
        self.book.touch(m, "uploading")

    async def packed(self, host: str, req: LinkMovePackedReq) -> None:
        """The source uploaded it all (checked against what arrived), or says why not."""
        m = self.book.of(host, req.agent, req.move_id, "source")
        if req.error is None and (req.size != m.written or req.sha256 != await self._spool_sha(m)):
            req = req.model_copy(
                update={"error": "the uploaded archive does not match its checksum"}
            )
        m.size, m.sha256, m.error = req.size, req.sha256, req.error
        m.packed.set()
        self.book.touch()

    async def _spool_sha(self, m: Move) -> str:
        return await anyio.to_thread.run_sync(file_sha, m.spool)

    async def get(self, host: str, req: LinkMoveGetReq) -> MoveChunk:
        """The target's next chunk of the archive."""
        m, offset = self.book.of(host, req.agent, req.move_id, "target"), req.offset
        if not m.packed.is_set() or offset > m.size:
            raise InvalidRequest(f"move {m.move_id}: no bytes at offset {offset}")

        def read() -> bytes:
            with m.spool.open("rb") as f:
                f.seek(offset)
                return f.read(MOVE_CHUNK)

        data = await anyio.to_thread.run_sync(read)
        m.fetched = max(m.fetched, offset + len(data))
        self.book.touch()
        return MoveChunk(data=base64.b64encode(data).decode(), sha256=sha(data))

    async def unpacked(self, host: str, req: LinkMoveUnpackedReq) -> None:
        """The target has the agent's directory in place, or says why not."""
        m = self.book.of(host, req.agent, req.move_id, "target")
        m.shared, m.error = req.shared, req.error
        m.unpacked.set()
        self.book.touch()

    async def dropped(self, host: str, req: LinkMoveDroppedReq) -> None:
        """The source dropped its copy (the move's last step)."""
        row = await self.assignments.get(req.agent)
        if row is None or row.move_id != req.move_id or row.move_from != host:
            raise Conflict(f"no move {req.move_id} of {req.agent} is waiting for {host!r}")
        if row.move_phase != "cleanup":
            raise Conflict(f"move {req.move_id} of {req.agent} is not committed; keep the copy")
        await self.assignments.end_move(req.agent, req.move_id)
        log.info("agent host %s dropped its copy of %s (move %s)", host, req.agent, req.move_id)
        m = self.book.get(req.agent)
        if m is not None and m.move_id == req.move_id:
            m.dropped.set()
