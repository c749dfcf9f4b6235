"""One hive per home: an ``flock`` held for as long as a coordinator (or host) runs.

Two coordinators on one home would be two writers of one database; two
hosts would activate the same agents twice. Each role holds an exclusive
``flock`` on its own file in ``run/`` (``coordinator.lock``, ``host.lock``, and
``up.lock`` for the ``hivectl up`` that supervises both) for its whole life.
The kernel drops the lock when the process dies, however it dies, so a stale
file never blocks a restart. The holder's pid is written
into the file so a refusal can name it.

On a PostgreSQL store a second coordinator on the same home is a standby:
it *waits* for the lock (:meth:`HomeLock.wait_acquire`) instead of being
refused, and only the lock's holder may then go on to take the database's
lease. Two active coordinators on one home stay impossible (one flock), and
the lease keeps two homes sharing a database to one active coordinator.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import anyio

from hyperhive.config import HivePaths
from hyperhive.errors import Conflict

__all__ = ["HomeLock", "Role", "holder", "lock_path", "refuse_if_held"]

# ``up``: the supervisor of both (``hivectl down`` finds it by this lock).
Role = Literal["coordinator", "host", "up"]
PROBE_RETRIES = 6
WAIT_POLL_S = 0.2


def lock_path(paths: HivePaths, role: Role) -> Path:
    return paths.run / f"{role}.lock"


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


def _refusal(paths: HivePaths, role: Role, pid: int | None) -> Conflict:
    who = f"pid {pid}" if pid is not None else "another process"
    name = "`hivectl up`" if role == "up" else role
    return Conflict(
        f"the hive home {paths.home} is already in use: its {name} runs as {who} "
        f"(it holds {lock_path(paths, role)}). Stop that hive first (`hivectl down`, "
        f"Ctrl-C in its `hivectl up`, or `kill {pid if pid is not None else '<pid>'}`), or "
        "use another --home"
    )


class HomeLock:
    """An exclusive lock on ``run/<role>.lock``; released on :meth:`release` or death."""

    def __init__(self, paths: HivePaths, role: Role) -> None:
        self.paths = paths
        self.role: Role = role
        self.path = lock_path(paths, role)
        self._fd: int | None = None

    def _open(self) -> int:
        self.paths.run.mkdir(parents=True, exist_ok=True, mode=0o700)
        # O_CLOEXEC (Python's default): no child (claude, git) inherits the lock and
        # keeps the home held after its holder died.
        return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def _held(self, fd: int) -> HomeLock:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    async def wait_acquire(self, on_wait: Callable[[int | None], None]) -> HomeLock:
        """Take the lock once its holder is gone; ``on_wait(pid)`` once if it must wait.

        Polled (not a blocking ``flock`` in a thread) so that a signal while
        waiting stops the wait at once.
        """
        fd = self._open()
        told = False
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return self._held(fd)
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                        raise
                if not told:
                    told = True
                    on_wait(_read_pid(fd))
                await anyio.sleep(WAIT_POLL_S)
        except BaseException:
            if self._fd != fd:
                os.close(fd)
            raise

    def acquire(self) -> HomeLock:
        """Take the lock now or raise ``Conflict`` naming the pid that holds it."""
        fd = self._open()
        # A few tries: another ``up``'s probe (:func:`holder`) holds it for an instant.
        for attempt in range(PROBE_RETRIES):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    os.close(fd)
                    raise
                if attempt == PROBE_RETRIES - 1:
                    pid = _read_pid(fd)
                    os.close(fd)
                    raise _refusal(self.paths, self.role, pid) from None
                time.sleep(0.05)
        return self._held(fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor drops the flock
            self._fd = None

    def __enter__(self) -> HomeLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def holder(paths: HivePaths, role: Role) -> int | None:
    """The pid holding ``role``'s lock, if any, without taking it for longer than a probe.

    ``hivectl up`` asks before starting anything, so a second ``up`` is refused
    with the first one's pids instead of a coordinator that dies in its log.
    """
    path = lock_path(paths, role)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return _read_pid(fd) or -1
            raise
        return None
    finally:
        os.close(fd)


def refuse_if_held(paths: HivePaths) -> None:
    """Raise ``Conflict`` if a coordinator or host already runs on this home."""
    for role in ("coordinator", "host"):
        pid = holder(paths, role)
        if pid is not None:
            raise _refusal(paths, role, pid if pid > 0 else None)
