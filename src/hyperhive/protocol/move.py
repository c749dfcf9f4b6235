"""``hivectl agents move`` over the host link: the source packs the agent's directory
and uploads it to the coordinator in checksummed chunks, the target fetches and
unpacks it, and the source drops its copy once the target runs the agent.

Every chunk is at most ``MOVE_CHUNK`` bytes (base64 in the frame) and carries its
SHA-256; the whole archive's SHA-256 is checked by the coordinator on upload and
by the target before it unpacks anything.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hyperhive.protocol.base import Req, _Out

__all__ = [
    "MOVE_TIMEOUT",
    "MOVE_CHUNK",
    "LinkMoveDroppedReq",
    "LinkMoveGetReq",
    "LinkMovePackedReq",
    "LinkMovePutReq",
    "LinkMoveUnpackedReq",
    "MoveChunk",
    "MoveDropCmd",
    "MoveInCmd",
    "MoveOutCmd",
    "Moved",
    "OpAgentMoveReq",
]

# Raw bytes per chunk: with base64 and the envelope well under the 1 MiB frame default.
MOVE_CHUNK = 256 * 1024
# Bounds one move end to end (the source's running turn finishing included); the
# operator's ``agents move`` waits as long for its answer.
MOVE_TIMEOUT = 900.0
_ID = Field(pattern=r"^[0-9a-f]{1,64}$")  # it names files on both hosts
_SHA = Field(pattern=r"^[0-9a-f]{64}$")
_B64 = Field(max_length=(MOVE_CHUNK * 4) // 3 + 8)


# ---- coordinator → host -------------------------------------------------------------


class MoveOutCmd(Req[None]):
    """To the source: stop the agent (its turn finishes), pack and upload its directory."""

    cmd: Literal["move_out"]
    agent: str
    move_id: str = _ID


class MoveInCmd(Req[None]):
    """To the target: fetch the archive, check it, unpack it as the agent's directory."""

    cmd: Literal["move_in"]
    agent: str
    move_id: str = _ID
    size: int = Field(ge=0)
    sha256: str = _SHA


class MoveDropCmd(Req[None]):
    """To the source, after the target runs the agent: remove the copy it packed."""

    cmd: Literal["move_drop"]
    agent: str
    move_id: str = _ID


# ---- host → coordinator -------------------------------------------------------------


class LinkMovePutReq(Req[None]):
    cmd: Literal["move_put"]
    agent: str
    move_id: str = _ID
    offset: int = Field(ge=0)
    data: str = _B64
    sha256: str = _SHA


class LinkMovePackedReq(Req[None]):
    """The source uploaded everything (or says why it could not: ``error``)."""

    cmd: Literal["move_packed"]
    agent: str
    move_id: str = _ID
    size: int = Field(default=0, ge=0)
    sha256: str = ""
    error: str | None = None


class MoveChunk(_Out):
    data: str
    sha256: str


class LinkMoveGetReq(Req[MoveChunk]):
    cmd: Literal["move_get"]
    agent: str
    move_id: str = _ID
    offset: int = Field(ge=0)


class LinkMoveUnpackedReq(Req[None]):
    """The target has the agent's directory in place (``shared``: it already saw the
    source's, one disk for both), or says why not (``error``)."""

    cmd: Literal["move_unpacked"]
    agent: str
    move_id: str = _ID
    shared: bool = False
    error: str | None = None


class LinkMoveDroppedReq(Req[None]):
    cmd: Literal["move_dropped"]
    agent: str
    move_id: str = _ID


# ---- operator -----------------------------------------------------------------------


class Moved(_Out):
    agent: str
    source: str | None
    target: str
    copied_bytes: int
    running: bool
    # One disk for both hosts: nothing needed copying.
    shared_disk: bool = False


class OpAgentMoveReq(Req[Moved]):
    """Move an agent to another agent host, its files and session with it (operator only)."""

    cmd: Literal["agent_move"]
    agent: str
    to: str = Field(min_length=1, max_length=64)
