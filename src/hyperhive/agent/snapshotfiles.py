"""What an agent's snapshot holds, as files: collected without following the agent's
links, packed into a gzip'd tar, and unpacked on another host as the agent's own.

A snapshot is the agent's durable state: its ``state/`` (notes, the harness's
session id, task tables) and the claude session the harness resumes
(``~/.claude/projects/<cwd slug>/<session id>.jsonl`` and that session's
directory beside it). In the archive they are ``state/…`` and
``session/<slug>/…``.

The agent owns these directories and may plant links, fifos or devices in
them. Collecting walks by directory fd and opens every entry with
``O_NOFOLLOW``: a link is skipped (counted), never read through, and what is
read is only regular files. Unpacking trusts nothing in the archive: members
must be regular files (or directories) under ``state/`` or ``session/``, and
are written with :mod:`hyperhive.safefs` beneath the agent's directories,
owned by the agent's user. The session's slug is the new host's (claude finds
a session by its working directory, whose path may differ between hosts).

gzip, not zstd: the project has no zstd binding, and a turn's snapshot is
dominated by claude's JSON lines, which gzip shrinks well.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from hyperhive.agent.spec import AgentSpec
from hyperhive.errors import HiveError, StorageError
from hyperhive.safefs import atomic_write_beneath, read_beneath

__all__ = [
    "Collected",
    "SnapshotTooBig",
    "claude_slug",
    "collect",
    "pack",
    "unpack",
]

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a fifo the agent planted must not hang the open (it is skipped after).
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_SLUG_MAX = 200  # claude hashes longer slugs; then the snapshot's own slug is kept
_ROOTS = ("state", "session")
GZIP_LEVEL = 6


class SnapshotTooBig(HiveError):
    """The agent's state is larger than hive.toml's ``snapshot_max_bytes``."""

    code = "snapshot_too_big"

    def __init__(self, agent: str, size: int, limit: int) -> None:
        self.size, self.limit = size, limit
        super().__init__(
            f"{agent}'s snapshot refused: its state/ and claude session hold {size:,} bytes, "
            f"over hive.toml's snapshot_max_bytes ({limit:,}); the previous snapshot is kept. "
            "The agent can prune its state/ notes, or the operator raise the limit"
        )


@dataclass
class Collected:
    """The files of a snapshot, by their name in the archive."""

    files: dict[str, tuple[bytes, int, float]] = field(default_factory=dict)  # data, mode, mtime
    skipped: list[str] = field(default_factory=list)  # links and other non-files, not followed

    @property
    def raw_bytes(self) -> int:
        return sum(len(data) for data, _, _ in self.files.values())

    def hashes(self) -> dict[str, str]:
        """Each file's SHA-256 (with its mode): what says the state changed."""
        return {
            name: hashlib.sha256(data).hexdigest() + f":{mode:o}"
            for name, (data, mode, _) in sorted(self.files.items())
        }


def claude_slug(path: Path) -> str:
    """The directory name claude keeps a working directory's sessions under."""
    return re.sub(r"[^a-zA-Z0-9]", "-", str(path))


class _Budget:
    def __init__(self, limit: int) -> None:
        self.limit, self.total = limit, 0

    def take(self, size: int) -> bool:
        """Count ``size``; False once over the limit (files are then only counted)."""
        self.total += size
        return self.total <= self.limit


def _walk(dfd: int, prefix: str, out: Collected, budget: _Budget) -> None:
    with os.scandir(dfd) as entries:
        names = sorted(e.name for e in entries)
    for name in names:
        arc = f"{prefix}/{name}"
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            continue  # gone while walking
        if stat.S_ISDIR(st.st_mode):
            try:
                sub = os.open(name, _DIR, dir_fd=dfd)
            except OSError:
                out.skipped.append(arc)  # swapped for a link meanwhile: not followed
                continue
            try:
                _walk(sub, arc, out, budget)
            finally:
                os.close(sub)
        elif stat.S_ISREG(st.st_mode):
            _read(dfd, name, arc, out, budget)
        else:
            out.skipped.append(arc)  # a link, fifo, socket or device: never followed


def _read(dfd: int, name: str, arc: str, out: Collected, budget: _Budget) -> None:
    try:
        fd = os.open(name, _FILE, dir_fd=dfd)
    except OSError:
        out.skipped.append(arc)  # swapped for a link (ELOOP) or gone: not followed
        return
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            out.skipped.append(arc)
            return
        if not budget.take(st.st_size):
            return  # over: only counted, for the refusal's figure
        data = fh.read(st.st_size)
    if arc.startswith("session/") and arc.endswith(".jsonl"):
        # The next turn's claude may be appending already: keep whole lines only.
        data = data[: data.rfind(b"\n") + 1]
    out.files[arc] = (data, stat.S_IMODE(st.st_mode), st.st_mtime)


def _session_id(spec: AgentSpec) -> str | None:
    """The session the harness resumes (``state/harness/session.json``), read beneath
    ``state/`` with no link followed."""
    try:
        raw = read_beneath(spec.state_dir, spec.state_dir / "harness" / "session.json", 4096)
        data = json.loads(raw or b"null")
    except (StorageError, ValueError):
        return None
    sid = data.get("session_id") if isinstance(data, dict) else None
    # A session id names files: nothing but what claude makes (a UUID).
    return sid if isinstance(sid, str) and re.fullmatch(r"[A-Za-z0-9-]{1,100}", sid) else None


def _open_dir(root: Path, *parts: str) -> int | None:
    """An fd for ``root/parts…``, no link followed below ``root``; None if absent."""
    try:
        fd = os.open(root, _DIR)
    except OSError:
        return None
    for part in parts:
        try:
            nxt = os.open(part, _DIR, dir_fd=fd)
        except OSError:
            os.close(fd)
            return None
        os.close(fd)
        fd = nxt
    return fd


def collect(spec: AgentSpec, limit: int) -> Collected:
    """The agent's state/ and claude session, read with no link followed.

    Raises :class:`SnapshotTooBig` when they hold more than ``limit`` bytes.
    """
    out = Collected()
    budget = _Budget(limit)
    fd = _open_dir(spec.state_dir)
    if fd is not None:
        try:
            _walk(fd, "state", out, budget)
        finally:
            os.close(fd)
    sid = _session_id(spec)
    projects = _open_dir(spec.home_dir, ".claude", "projects")
    if sid is not None and projects is not None:
        try:
            for slug in _slugs_with(projects, sid):
                sub = os.open(slug, _DIR, dir_fd=projects)
                try:
                    _read(sub, f"{sid}.jsonl", f"session/{slug}/{sid}.jsonl", out, budget)
                    try:
                        side = os.open(sid, _DIR, dir_fd=sub)
                    except OSError:
                        side = None  # no session directory (no subagent transcripts)
                    if side is not None:
                        try:
                            _walk(side, f"session/{slug}/{sid}", out, budget)
                        finally:
                            os.close(side)
                finally:
                    os.close(sub)
        finally:
            os.close(projects)
    elif projects is not None:
        os.close(projects)
    if budget.total > limit:
        raise SnapshotTooBig(spec.name, budget.total, limit)
    return out


def _slugs_with(projects: int, sid: str) -> Iterator[str]:
    """The project directories (of any working directory) that hold session ``sid``."""
    with os.scandir(projects) as entries:
        names = sorted(e.name for e in entries)
    for name in names:
        try:
            st = os.stat(f"{name}/{sid}.jsonl", dir_fd=projects, follow_symlinks=False)
            top = os.stat(name, dir_fd=projects, follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(top.st_mode) and stat.S_ISREG(st.st_mode):
            yield name


def pack(collected: Collected) -> bytes:
    """The files as a gzip'd tar (owner-less: the restoring host gives them their user)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=GZIP_LEVEL) as tar:
        for name, (data, mode, mtime) in sorted(collected.files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, int(mtime)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _member_path(member: tarfile.TarInfo) -> PurePosixPath:
    path = PurePosixPath(member.name)
    if path.is_absolute() or ".." in path.parts or len(path.parts) < 2:
        raise StorageError(f"the snapshot holds a path outside the agent's state: {member.name!r}")
    if path.parts[0] not in _ROOTS or (path.parts[0] == "session" and len(path.parts) < 3):
        raise StorageError(f"the snapshot holds an unexpected entry: {member.name!r}")
    if not (member.isfile() or member.isdir()):
        raise StorageError(f"the snapshot holds a link or device: {member.name!r}")
    return path


def unpack(
    blob: bytes, spec: AgentSpec, owner: tuple[int, int] | None, limit: int
) -> tuple[int, int]:
    """Write the snapshot's files into the agent's directories on this host, as its
    user's; ``(files, bytes)`` written. Nothing is written if any member is unsafe, or
    if they hold more than ``limit`` bytes (a decompression bomb)."""
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        members = tar.getmembers()
        paths = [_member_path(m) for m in members]
        total = sum(m.size for m in members if m.isfile())
        if total > limit:
            raise StorageError(
                f"the snapshot unpacks to {total:,} bytes, over snapshot_max_bytes ({limit:,})"
            )
        slug = claude_slug(spec.work_dir)
        written = 0
        for member, path in zip(members, paths, strict=True):
            if not member.isfile():
                continue
            source = tar.extractfile(member)
            data = source.read() if source is not None else b""
            mode = member.mode & 0o777 & ~0o022  # like a move: no set-id bits, no g/o write
            if path.parts[0] == "state":
                root = spec.state_dir
                dest = root.joinpath(*path.parts[1:])
            else:
                # session/<slug>/…: under this host's slug when claude names it plainly.
                here = slug if len(slug) <= _SLUG_MAX else path.parts[1]
                root = spec.home_dir
                dest = root.joinpath(".claude", "projects", here, *path.parts[2:])
            atomic_write_beneath(root, dest, data, mode, owner)
            written += 1
    return written, total
