"""Writing and reading inside a directory an agent controls, without following its links.

The coordinator and the host run as root and must touch files in an agent's
``state/`` (task output, task and session tables). The agent
can replace any name there with a symlink; a plain ``open`` would then write
(or read) whatever the link points at, as root. Every path component below
the trusted root is opened with ``O_NOFOLLOW`` relative to its parent's fd,
so a planted link fails the call instead of redirecting it.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

from hyperhive.errors import StorageError

__all__ = [
    "atomic_write_beneath",
    "open_beneath",
    "read_beneath",
    "remove_beneath",
    "write_if_changed_beneath",
]

Owner = tuple[int, int]

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _parts(root: Path, path: Path) -> tuple[str, ...]:
    try:
        rel = path.relative_to(root)
    except ValueError as exc:
        raise StorageError(f"{path} is not inside {root}") from exc
    parts = rel.parts
    if not parts or any(p in ("..", ".") for p in parts):
        raise StorageError(f"{path} is not a file below {root}")
    return parts


def _parent_fd(
    root: Path, parts: tuple[str, ...], make_dirs: bool, owner: Owner | None = None
) -> int:
    fd = os.open(root, _DIR)
    try:
        for part in parts[:-1]:
            made = False
            if make_dirs:
                try:
                    os.mkdir(part, 0o755 if owner is None else 0o700, dir_fd=fd)
                    made = True
                except FileExistsError:
                    pass
            nxt = os.open(part, _DIR, dir_fd=fd)
            os.close(fd)
            fd = nxt
            if made and owner is not None:
                os.fchown(fd, *owner)  # by fd: the directory just opened, never a link
    except OSError:
        os.close(fd)
        raise
    return fd


def _refuse(path: Path, exc: OSError) -> StorageError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return StorageError(f"refusing to follow a symlink at or above {path}")
    return StorageError(f"cannot open {path}: {exc.strerror or exc}")


def open_beneath(
    root: Path, path: Path, flags: int, mode: int = 0o644, make_dirs: bool = True
) -> int:
    """An fd for ``path`` (below ``root``) opened with no symlink followed on the way."""
    parts = _parts(root, path)
    try:
        dfd = _parent_fd(root, parts, make_dirs)
        try:
            return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
        finally:
            os.close(dfd)
    except OSError as exc:
        raise _refuse(path, exc) from exc


def read_beneath(root: Path, path: Path, limit: int) -> bytes | None:
    """At most ``limit`` bytes of ``path`` (below ``root``); None if it does not exist.

    A link planted anywhere on the way is refused (``StorageError``), never read through.
    """
    try:
        fd = open_beneath(root, path, os.O_RDONLY, make_dirs=False)
    except StorageError:
        if not path.exists() and not path.is_symlink():
            return None
        raise
    with os.fdopen(fd, "rb") as fh:
        return fh.read(limit)


def atomic_write_beneath(
    root: Path,
    path: Path,
    data: bytes,
    mode: int = 0o644,
    owner: Owner | None = None,
    *,
    durable: bool = True,
) -> None:
    """Replace ``path`` atomically (temp + fsync + rename) without following links.

    ``owner`` (uid, gid) is given the file and any directory created for it.
    ``durable=False`` skips both fsyncs, for a file derived afresh at every start
    (a reader still never sees it half-written; a crash may leave the old or an
    empty one, which the next start replaces).
    """
    parts = _parts(root, path)
    try:
        dfd = _parent_fd(root, parts, make_dirs=True, owner=owner)
    except OSError as exc:
        raise _refuse(path, exc) from exc
    tmp = f".{parts[-1]}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            mode,
            dir_fd=dfd,
        )
        try:
            os.write(fd, data)
            if owner is not None:
                os.fchown(fd, *owner)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        # rename replaces a planted link itself, never what it points at.
        os.rename(tmp, parts[-1], src_dir_fd=dfd, dst_dir_fd=dfd)
        if durable:
            os.fsync(dfd)
    except OSError as exc:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        raise _refuse(path, exc) from exc
    finally:
        os.close(dfd)


def write_if_changed_beneath(
    root: Path,
    path: Path,
    data: bytes,
    mode: int = 0o644,
    owner: Owner | None = None,
    *,
    durable: bool = True,
) -> bool:
    """:func:`atomic_write_beneath`, unless ``path`` already is exactly that file.

    "Exactly" is a regular file with these bytes, this mode and (if given) owner.
    A host restoring its agents writes every one's skill files again, mostly the
    same bytes. True if it wrote.
    """
    if _holds(root, path, data, mode, owner):
        return False
    atomic_write_beneath(root, path, data, mode, owner, durable=durable)
    return True


def _holds(root: Path, path: Path, data: bytes, mode: int, owner: Owner | None) -> bool:
    try:  # O_NONBLOCK: a FIFO the agent planted there must not hang the open
        fd = open_beneath(root, path, os.O_RDONLY | os.O_NONBLOCK, make_dirs=False)
    except StorageError:
        return False  # missing, or a link on the way: the write replaces or refuses it
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != mode:
            return False
        if st.st_size != len(data) or (owner is not None and (st.st_uid, st.st_gid) != owner):
            return False
        return fh.read(len(data) + 1) == data


def remove_beneath(root: Path, path: Path) -> bool:
    """Unlink the file ``path`` (below ``root``), then its directory if that is left empty.

    No link is followed on the way; a missing file is not an error (False).
    """
    parts = _parts(root, path)
    try:
        dfd = _parent_fd(root, parts, make_dirs=False)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _refuse(path, exc) from exc
    try:
        os.unlink(parts[-1], dir_fd=dfd)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _refuse(path, exc) from exc
    finally:
        os.close(dfd)
    if len(parts) > 1:
        try:
            pfd = _parent_fd(root, parts[:-1], make_dirs=False)
        except OSError:
            return True
        try:
            os.rmdir(parts[-2], dir_fd=pfd)
        except OSError:
            pass  # not empty (the agent keeps files there): leave it
        finally:
            os.close(pfd)
    return True
