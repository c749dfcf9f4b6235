"""hivectl down: stop the hive ``hivectl up`` runs on this home, from another terminal.

It signals that ``up`` (found by the ``run/up.lock`` it holds) exactly as Ctrl-C
in its terminal would: agents finish their turn, the host stops, then the
coordinator, and ``up`` says goodbye. ``down`` returns once ``up`` has exited.
``--now`` is the second Ctrl-C: agents' claude processes are killed at once.

Signals, not a request to the coordinator: ``up`` is the process that stops
the others in order, and it is the one the operator started.
"""

from __future__ import annotations

import os
import select
import signal
import time

import click

from hyperhive.cli.base import _Ctx, main, pass_ctx
from hyperhive.cli.output import StatusLine, emit, json_output
from hyperhive.cli.shapes import Stopped
from hyperhive.config import HivePaths
from hyperhive.errors import Conflict, PermissionDenied, TimedOut, Unavailable
from hyperhive.homelock import holder
from hyperhive.supervisor import STOP_GRACE

__all__ = ["down", "up_pid"]

# up gives its host STOP_GRACE to let turns finish, then the coordinator 20 s.
DOWN_WITHIN_S = STOP_GRACE + 60.0


def up_pid(paths: HivePaths) -> int:
    """The pid of the ``hivectl up`` running on ``paths``' home, or why there is none."""
    pid = holder(paths, "up")
    if pid is not None and pid > 0:
        return pid
    others = {role: holder(paths, role) for role in ("coordinator", "host")}
    running = {role: p for role, p in others.items() if p is not None}
    if running:
        which = ", ".join(f"its {role} runs as pid {p}" for role, p in running.items())
        raise Conflict(
            f"the hive on {paths.home} was not started by `hivectl up` ({which}): stop it "
            "where it runs (Ctrl-C in its terminal, its service manager, or `kill PID`)"
        )
    raise Unavailable(f"no hive is running on {paths.home} (no `hivectl up` holds it)")


def _wait_gone(pid: int, within: float, status: StatusLine) -> bool:
    """Until ``pid`` has exited (True) or ``within`` seconds passed; a pidfd, not a poll."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        began = time.monotonic()
        while (left := within - (time.monotonic() - began)) > 0:
            waited = time.monotonic() - began
            status.show(
                f"stopping the hive (up, pid {pid}): agents finish their turns ({waited:.0f}s)"
            )
            if poller.poll(int(min(left, 1.0) * 1000)):
                return True
        return False
    finally:
        os.close(fd)
        status.clear()


@main.command()
@click.option(
    "--now",
    is_flag=True,
    help="Do not let running turns finish: kill agents' claude processes at once (as a "
    "second Ctrl-C in `up` does).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DOWN_WITHIN_S,
    show_default=True,
    help="Seconds to wait for the hive to stop (exit 6 if it has not).",
)
@json_output(Stopped)
@pass_ctx
def down(obj: _Ctx, now: bool, timeout: float, as_json: bool) -> None:
    """Stop the hive `hivectl up` runs on this home, as Ctrl-C in its terminal would:
    agents finish their turn, then everything stops. Returns once it has."""
    pid = up_pid(obj.paths)
    try:
        os.kill(pid, signal.SIGTERM)
        if now:
            os.kill(pid, signal.SIGTERM)  # up's second signal: kill, do not wait for turns
    except ProcessLookupError:
        pass  # it stopped on its own just now
    except PermissionError as exc:
        raise PermissionDenied(
            f"`hivectl up` (pid {pid}) runs as another user: run `hivectl down` as that user"
        ) from exc
    if not _wait_gone(pid, timeout, StatusLine()):
        raise TimedOut(
            f"the hive (up, pid {pid}) is still stopping after {timeout:g}s: agents are "
            "finishing their turns; `hivectl down --now` stops them at once"
        )
    result = Stopped(home=str(obj.home), pid=pid, forced=now)
    emit(result, lambda r: click.echo(f"stopped the hive on {r.home} (up, pid {r.pid})"))
