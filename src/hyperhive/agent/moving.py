"""An agent host's side of ``agents move``: pack an agent's directory and upload it
(the source), fetch, check and unpack it (the target), drop the old copy (the
source, once the target runs the agent). See ``core.moves`` for the whole protocol.

The archive is a plain tar of ``state/``, ``home/`` (claude's session), ``work/``,
``config/`` and ``turns/`` (the host's records of its turns, which stay the host's).
Unpacking trusts nothing in it: members must be regular files,
directories or symlinks that stay inside the agent's directory, and they are
owned by the host (then by the agent's user under bubblewrap), never by the ids
the archive names. Python 3.11.2's tarfile has no extraction filters yet.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import shutil
import tarfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path, PurePosixPath

import anyio

from hyperhive.client import RpcClient
from hyperhive.config import HivePaths
from hyperhive.errors import HiveError
from hyperhive.protocol import (
    MOVE_CHUNK,
    LinkMoveDroppedReq,
    LinkMoveGetReq,
    LinkMovePackedReq,
    LinkMovePutReq,
    LinkMoveUnpackedReq,
    MoveDropCmd,
    MoveInCmd,
    MoveOutCmd,
)
from hyperhive.sysusers import chown_tree, ensure_user

__all__ = ["MOVED_PARTS", "HostMoves", "pack", "unpack"]

log = logging.getLogger(__name__)

MOVED_PARTS = ("state", "home", "work", "config", "turns")
# The host's own part of the agent's directory: never given to the agent's user.
HOST_PARTS = frozenset({"turns"})


def _marker(agent_dir: Path, move_id: str) -> Path:
    # Left in the source's copy while it is packed: the target finding it in its own view
    # of the agent's directory means one disk for both (nothing to copy), and the
    # source drops only a copy that carries it.
    return agent_dir / f".move-{move_id}"


def pack(agent_dir: Path, out: Path) -> tuple[int, str]:
    """Tar ``agent_dir``'s moved parts into ``out``; its size and SHA-256."""

    def skip_markers(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if PurePosixPath(info.name).name.startswith(".move-") else info

    with tarfile.open(out, "w") as tar:
        for part in MOVED_PARTS:
            if (agent_dir / part).exists():
                tar.add(agent_dir / part, arcname=part, filter=skip_markers)
    digest = hashlib.sha256()
    with out.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return out.stat().st_size, digest.hexdigest()


def _refusal(member: tarfile.TarInfo) -> str | None:
    path = PurePosixPath(member.name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        return "a path outside the agent's directory"
    if path.parts[0] not in MOVED_PARTS:
        return f"an unexpected top-level entry {path.parts[0]!r}"
    if member.issym():
        resolved = os.path.normpath(str(path.parent / member.linkname))
        if PurePosixPath(member.linkname).is_absolute() or resolved.split("/")[0] == "..":
            return f"a symlink leaving the agent's directory ({member.linkname})"
        return None
    if not (member.isfile() or member.isdir()):
        return "a device, fifo or hard link"
    return None


def unpack(archive: Path, dest: Path) -> None:
    """Extract ``archive`` into the new directory ``dest``, refusing anything unsafe."""
    dest.mkdir(parents=True, mode=0o700)
    with tarfile.open(archive, "r") as tar:
        members = tar.getmembers()
        for member in members:
            problem = _refusal(member)
            if problem is not None:
                raise ValueError(f"the moved archive holds {problem}: {member.name!r}")
        for member in members:
            member.uid, member.gid = os.getuid(), os.getgid()
            member.uname = member.gname = ""
            member.mode &= 0o777 & ~0o022
            tar.extract(member, dest, set_attrs=not member.issym())


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class HostMoves:
    """Runs the move commands the coordinator pushes to this host."""

    def __init__(
        self,
        paths: HivePaths,
        runtime: str,
        link: Callable[[], RpcClient | None],
        stop_agent: Callable[[str], Awaitable[None]],
    ) -> None:
        self.paths = paths
        self.runtime = runtime
        self._link = link
        # Stops the agent if it runs here (its turn finishing), returning once it has.
        self._stop_agent = stop_agent

    def _rpc(self) -> RpcClient:
        link = self._link()
        if link is None:
            raise OSError("the coordinator link is down")
        return link

    @property
    def _spool(self) -> Path:
        spool = self.paths.run / "moves"
        spool.mkdir(parents=True, exist_ok=True, mode=0o700)
        return spool

    async def move_out(self, cmd: MoveOutCmd) -> None:
        archive = self._spool / f"{cmd.move_id}.tar"
        try:
            await self._stop_agent(cmd.agent)
            agent_dir = self.paths.agent_dir(cmd.agent)
            agent_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            _marker(agent_dir, cmd.move_id).touch()
            size, sha = await anyio.to_thread.run_sync(pack, agent_dir, archive)
            log.info("moving %s out: %d bytes packed (move %s)", cmd.agent, size, cmd.move_id)
            offset = 0
            with archive.open("rb") as f:
                while data := f.read(MOVE_CHUNK):
                    await self._rpc().call(
                        LinkMovePutReq(
                            cmd="move_put",
                            agent=cmd.agent,
                            move_id=cmd.move_id,
                            offset=offset,
                            data=base64.b64encode(data).decode(),
                            sha256=_sha(data),
                        )
                    )
                    offset += len(data)
            report = LinkMovePackedReq(
                cmd="move_packed", agent=cmd.agent, move_id=cmd.move_id, size=size, sha256=sha
            )
        except (OSError, HiveError, tarfile.TarError) as exc:
            log.error("moving %s out failed: %s", cmd.agent, exc)
            report = LinkMovePackedReq(
                cmd="move_packed", agent=cmd.agent, move_id=cmd.move_id, error=str(exc)
            )
        finally:
            archive.unlink(missing_ok=True)
        await self._report(report)

    async def move_in(self, cmd: MoveInCmd) -> None:
        agent_dir = self.paths.agent_dir(cmd.agent)
        marker = _marker(agent_dir, cmd.move_id)
        report = LinkMoveUnpackedReq(cmd="move_unpacked", agent=cmd.agent, move_id=cmd.move_id)
        if marker.exists():
            # One disk for both hosts: the agent's files are already here.
            marker.unlink()
            await self._report(report.model_copy(update={"shared": True}))
            return
        archive = self._spool / f"{cmd.move_id}.in.tar"
        staging = self.paths.home / "agents" / ".incoming" / f"{cmd.agent}-{cmd.move_id}"
        try:
            await self._fetch(cmd, archive)
            shutil.rmtree(staging, ignore_errors=True)
            await anyio.to_thread.run_sync(unpack, archive, staging)
            await anyio.to_thread.run_sync(self._into_place, cmd.agent, staging, agent_dir)
            log.info("moved %s in: %d bytes (move %s)", cmd.agent, cmd.size, cmd.move_id)
        except (OSError, HiveError, ValueError, tarfile.TarError) as exc:
            log.error("moving %s in failed: %s", cmd.agent, exc)
            shutil.rmtree(staging, ignore_errors=True)
            report = report.model_copy(update={"error": str(exc)})
        finally:
            archive.unlink(missing_ok=True)
        await self._report(report)

    async def _fetch(self, cmd: MoveInCmd, archive: Path) -> None:
        digest = hashlib.sha256()
        offset = 0
        with archive.open("wb") as f:
            while offset < cmd.size:
                chunk = await self._rpc().call(
                    LinkMoveGetReq(
                        cmd="move_get", agent=cmd.agent, move_id=cmd.move_id, offset=offset
                    )
                )
                data = base64.b64decode(chunk.data)
                if not data or _sha(data) != chunk.sha256:
                    raise ValueError(f"chunk at {offset} of move {cmd.move_id} fails its checksum")
                f.write(data)
                digest.update(data)
                offset += len(data)
        if digest.hexdigest() != cmd.sha256:
            raise ValueError(f"the archive of move {cmd.move_id} does not match its checksum")

    def _into_place(self, agent: str, staging: Path, agent_dir: Path) -> None:
        if self.runtime == "bwrap":
            owner = ensure_user(self.paths, agent)
            if owner is not None:
                # Its parts, not the directory itself nor the host's turn records: an agent
                # owning the directory could swap the records' folder for one of its own.
                for part in MOVED_PARTS:
                    if part not in HOST_PARTS and (staging / part).exists():
                        chown_tree(staging / part, *owner)
        if agent_dir.exists():  # a stale copy (an earlier move undone): keep it aside
            trash = self.paths.home / "agents" / ".trash" / f"{agent}-stale-{int(time.time())}"
            trash.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            agent_dir.rename(trash)
        staging.rename(agent_dir)

    async def drop(self, cmd: MoveDropCmd) -> None:
        agent_dir = self.paths.agent_dir(cmd.agent)
        if _marker(agent_dir, cmd.move_id).exists():
            await anyio.to_thread.run_sync(shutil.rmtree, agent_dir)
            log.info("dropped the moved-out copy of %s (move %s)", cmd.agent, cmd.move_id)
        await self._report(
            LinkMoveDroppedReq(cmd="move_dropped", agent=cmd.agent, move_id=cmd.move_id)
        )

    async def _report(
        self, req: LinkMovePackedReq | LinkMoveUnpackedReq | LinkMoveDroppedReq
    ) -> None:
        try:
            await self._rpc().call(req)
        except (OSError, HiveError) as exc:
            # The coordinator undoes (or, after its commit, retries) what it did not hear.
            log.error("could not report %s of %s: %s", req.cmd, req.agent, exc)
