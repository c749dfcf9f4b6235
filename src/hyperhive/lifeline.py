"""A supervised process dies with its supervisor, even when that one is SIGKILLed.

``hivectl up`` starts the coordinator and the agent host in sessions of their
own (so the terminal's Ctrl-C reaches only ``up``, which stops them in
order). Nothing would then stop them if ``up`` itself died: Linux's
``PR_SET_PDEATHSIG`` does — the kernel signals the child when the thread that
forked it exits, however it exits. The child sets it first thing, then checks
``getppid()``: a supervisor that died before the ``prctl`` is noticed too.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal

__all__ = ["SUPERVISOR_ENV", "die_with_supervisor", "set_parent_death_signal"]

SUPERVISOR_ENV = "HIVE_SUPERVISOR_PID"
_PR_SET_PDEATHSIG = 1


def set_parent_death_signal(signum: int) -> None:
    """Ask the kernel to send ``signum`` to this process when its parent dies."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_PDEATHSIG): {os.strerror(err)}")


def die_with_supervisor(signum: int = signal.SIGTERM) -> None:
    """If started by ``hivectl up`` (``HIVE_SUPERVISOR_PID``), end when it ends.

    SIGTERM, not SIGKILL: the coordinator closes its database and the host
    stops its agents' claude processes the way a Ctrl-C would.
    """
    raw = os.environ.pop(SUPERVISOR_ENV, None)
    if not raw:
        return
    set_parent_death_signal(signum)
    if os.getppid() != int(raw):
        # The supervisor was gone before the prctl above took effect.
        os.kill(os.getpid(), signum)
