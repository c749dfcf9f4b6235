"""The one entry point through which every process of an agent is started.

Claude turns, bash tasks, subagents and daemons all go through
:meth:`AgentSandbox.open_process`, so isolation is decided in one place: with
an :class:`~hyperhive.agent.bwrap.Isolation` the command runs under
bubblewrap as the agent's own user (``runtime = "bwrap"``, the default);
without one it is a plain subprocess (``runtime = "unsandboxed"``, chosen
explicitly and warned about loudly).

A claude process (turn or subagent) is started with a raised
``oom_score_adj`` (:data:`CLAUDE_OOM_SCORE_ADJ`), set by ``choom`` before it
execs, so bubblewrap and everything claude starts inherit it: if memory runs
out anyway, the kernel kills a claude (its turn is redelivered), never the
host or the coordinator.

Every process starts in its own session, so its process group id is its pid
and :func:`signal_group` reaches the children it spawns too. The environment
is built, never inherited: the host's ``os.environ`` may hold secrets (tokens,
cloud keys) an agent must not see.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio
from anyio.abc import Process

from hyperhive.agent.bwrap import Isolation, isolated_argv
from hyperhive.errors import InvalidRequest

__all__ = [
    "CLAUDE_OOM_SCORE_ADJ",
    "DEFAULT_PATH",
    "AgentSandbox",
    "StdSpec",
    "process_identity",
    "signal_group",
]

log = logging.getLogger(__name__)

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
# Far above the host's and coordinator's 0, so a claude is the OOM killer's pick;
# short of 1000 so the kernel's own size ranking still counts among claudes.
CLAUDE_OOM_SCORE_ADJ = 800

StdSpec = int | IO[Any] | None
"""What ``stdin``/``stdout``/``stderr`` accept: ``subprocess.PIPE``/``DEVNULL``, an fd, a file."""


@dataclass(frozen=True)
class AgentSandbox:
    """Where and how one agent's processes run.

    ``env`` is the agent's base environment; ``PATH`` is taken from the host
    when ``env`` does not set one (the only variable passed through), and
    ``HOME`` is always the agent's home.
    """

    agent: str
    work: Path
    home: Path
    state: Path
    env: Mapping[str, str]
    isolation: Isolation | None = None

    def command(self, argv: Sequence[str], cwd: Path | None = None) -> list[str]:
        """The argv actually exec'd: bubblewrap around ``argv`` when isolated."""
        if not argv:
            raise InvalidRequest("cannot start a process with an empty argv")
        if self.isolation is None:
            return list(argv)
        return isolated_argv(self.isolation, argv, cwd if cwd is not None else self.work)

    def environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The child's whole environment: PATH, then the base env, then ``extra``, then HOME."""
        env = {"PATH": os.environ.get("PATH", DEFAULT_PATH)}
        env.update(self.env)
        if extra:
            env.update(extra)
        env["HOME"] = str(self.home)
        return env

    async def open_process(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        stdin: StdSpec = subprocess.PIPE,
        stdout: StdSpec = subprocess.PIPE,
        stderr: StdSpec = subprocess.PIPE,
        oom_score_adj: int | None = None,
    ) -> Process:
        """Start ``argv`` in its own session (pgid = pid), in ``cwd`` or the work dir.

        ``oom_score_adj``: the process and all it starts get this OOM score
        adjustment (raising needs no privilege).
        """
        where = cwd if cwd is not None else self.work
        command = self.command(argv, where)
        choom = shutil.which("choom") if oom_score_adj is not None else None
        if choom is not None:
            command = [choom, "-n", str(oom_score_adj), "--", *command]
        process = await anyio.open_process(
            command,
            # Isolated, the directory is bubblewrap's --chdir; the launcher starts in /.
            cwd="/" if self.isolation is not None else where,
            env=self.environment(env),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        if oom_score_adj is not None and choom is None:
            # No choom (util-linux): set it after the fact; what the process
            # started in its first instants keeps the old score.
            try:
                Path(f"/proc/{process.pid}/oom_score_adj").write_text(str(oom_score_adj))
            except OSError as exc:
                log.warning("could not raise oom_score_adj of pid %s: %s", process.pid, exc)
        return process


def signal_group(process_or_pid: Process | int, sig: int) -> bool:
    """Send ``sig`` to the process group led by a process we started.

    Returns whether a group was there to signal. The group outlives its leader
    while any child lives, so this still reaches a shell's orphaned children.
    """
    pid = process_or_pid if isinstance(process_or_pid, int) else process_or_pid.pid
    # pgid 0/1 or our own group would signal the host itself.
    if pid <= 1 or pid == os.getpgrp():
        raise ValueError(f"refusing to signal process group {pid}")
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return False
    return True


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown-boot"


def process_identity(pid: int) -> str | None:
    """A token naming *this* process, or None if ``pid`` is gone (or a zombie).

    A pid alone is reused; boot id + pid + start time (``/proc/<pid>/stat``
    field 22) is not, so a recorded identity tells a live task from a stranger.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # comm (field 2) may hold spaces and parens: split after the last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return f"{_boot_id()}:{pid}:{fields[19]}"
