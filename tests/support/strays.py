"""Reap what earlier, killed test runs left running: their PostgreSQL clusters and Synapses.

A run killed by ``timeout`` or ``kill -9`` never reaches its fixtures' teardown, so
its throwaway cluster (``/tmp/hh-pg-*``) and its Synapse keep running. The fixtures
that start them record their owner, the creating process, as ``pid:starttime``
(the start time guards against a reused pid): in ``<cluster>/owner`` and in the
server's environment (``HH_TEST_OWNER``). At the start of each session (each xdist
worker too) every recorded server whose owner is gone is stopped, and such a
cluster's directory removed. A live owner's servers, another run's included, are
never touched, nor anything started without an owner record.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.waits import wait_until

__all__ = [
    "OWNER_ENV",
    "OWNER_FILE",
    "PG_ROOT_PREFIX",
    "owner_alive",
    "owner_tag",
    "reap_strays",
]

OWNER_ENV = "HH_TEST_OWNER"
OWNER_FILE = "owner"
PG_ROOT_PREFIX = "hh-pg-"
# A stopped server gets this long to exit after SIGTERM/SIGQUIT before SIGKILL.
_GRACE_S = 10.0


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    return stat.rpartition(")")[2].split()[19]


def owner_tag(pid: int | None = None) -> str:
    """``pid:starttime`` of ``pid`` (default: this process)."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{_start_time(pid)}"


def owner_alive(tag: str) -> bool:
    """Whether the process ``tag`` names still runs (a malformed tag counts as alive:
    what cannot be read is left alone)."""
    pid_s, _, start = tag.strip().partition(":")
    if not pid_s.isdigit() or not start:
        return True
    return _start_time(int(pid_s)) == start


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) is gone for our purposes.
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z":
            return False
    return True


def _stop(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
    with contextlib.suppress(TimeoutError):
        wait_until(lambda: not _alive(pid), _GRACE_S)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _postmaster_pid(root: Path) -> int | None:
    try:
        first = (root / "data" / "postmaster.pid").read_text().split("\n", 1)[0].strip()
    except OSError:
        return None
    return int(first) if first.isdigit() else None


def _stray_clusters(tmp: Path) -> Iterator[Path]:
    for root in tmp.glob(f"{PG_ROOT_PREFIX}*"):
        try:
            tag = (root / OWNER_FILE).read_text()
        except OSError:
            continue  # no owner recorded (an older checkout's fixtures): not ours to judge
        if not owner_alive(tag):
            yield root


def _owned_processes() -> Iterator[tuple[int, str]]:
    """``(pid, owner tag)`` of every process started with ``HH_TEST_OWNER`` set."""
    key = f"{OWNER_ENV}=".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        for var in environ.split(b"\0"):
            if var.startswith(key):
                yield int(entry.name), var[len(key) :].decode(errors="replace")
                break


def reap_strays(tmp: Path | None = None) -> list[str]:
    """Stop the servers and remove the clusters of dead owners; returns what was done."""
    tmp = Path(tempfile.gettempdir()) if tmp is None else tmp
    done: list[str] = []
    for root in _stray_clusters(tmp):
        pid = _postmaster_pid(root)
        if pid is not None and _alive(pid):
            # SIGQUIT: PostgreSQL's immediate shutdown (its backends go with it).
            _stop(pid, signal.SIGQUIT)
            done.append(f"stopped PostgreSQL {pid} of {root}")
        shutil.rmtree(root, ignore_errors=True)
        done.append(f"removed {root}")
    me = os.getpid()
    for pid, tag in _owned_processes():
        if pid != me and not owner_alive(tag):
            _stop(pid, signal.SIGTERM)
            done.append(f"stopped pid {pid} (owner {tag} is gone)")
    return done


def pytest_sessionstart(session: pytest.Session) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for line in reap_strays():
        if reporter is not None:
            reporter.write_line(f"stray from a killed run: {line}")
