"""Open-file limits against the size of the hive, checked at start rather than failed later.

The coordinator holds about two file descriptors per agent (the agent's
socket listening, and its harness's connection): ~2,000 for 1,000 agents, on
top of a fixed base (database, meta repo, host link, dashboard viewers). A
process may raise its own soft limit up to the hard one, so only a hard limit
below the need has to be raised by the operator — before an ``accept`` fails
with EMFILE under load. :func:`fd_advice` is the pure rule; :func:`check_fd_limit`
reads (and lifts) this process's limits.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

__all__ = ["FDS_PER_AGENT", "FD_BASE", "FdAdvice", "check_fd_limit", "fd_advice", "fds_needed"]

FDS_PER_AGENT = 2
FD_BASE = 256


def fds_needed(agents: int) -> int:
    return FD_BASE + FDS_PER_AGENT * max(0, agents)


@dataclass(frozen=True)
class FdAdvice:
    """``raise_soft_to``: lift the soft limit (the process can); ``problem``: the operator must."""

    needed: int
    raise_soft_to: int | None = None
    problem: str | None = None


def _unlimited(limit: int) -> bool:
    return limit == resource.RLIM_INFINITY or limit < 0


def fd_advice(agents: int, soft: int, hard: int) -> FdAdvice:
    """What to do about RLIMIT_NOFILE ``(soft, hard)`` for a hive of ``agents``."""
    needed = fds_needed(agents)
    if not _unlimited(hard) and hard < needed:
        # Room to grow: twice the need, in whole KiB-sized steps.
        suggest = -(-2 * needed // 1024) * 1024
        return FdAdvice(
            needed,
            raise_soft_to=None if soft >= hard else hard,
            problem=(
                f"the open-files limit is too low for {agents} agent(s): the coordinator "
                f"needs about {needed} file descriptors ({FDS_PER_AGENT} per agent + "
                f"{FD_BASE}) but the hard limit (RLIMIT_NOFILE) is {hard}. Raise it to at "
                f"least {suggest} before the hive grows: `ulimit -Hn {suggest}; ulimit -n "
                f"{suggest}` (as root) in the shell that runs hivectl, `LimitNOFILE={suggest}` "
                "in its systemd unit, or a `nofile` line in /etc/security/limits.conf"
            ),
        )
    if not _unlimited(soft) and soft < needed:
        return FdAdvice(needed, raise_soft_to=hard)
    return FdAdvice(needed)


def check_fd_limit(agents: int) -> str | None:
    """Lift this process's soft limit as far as needed and allowed; the problem, if any."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    advice = fd_advice(agents, soft, hard)
    if advice.raise_soft_to is not None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (advice.raise_soft_to, hard))
    return advice.problem
