"""Bash task records and the pure rules around them (spec 001).

Pure module: no I/O. What a task is (:class:`TaskRecord`, as persisted in
``tasks.json``), what the agent is told about it (:class:`TaskReport`,
:class:`TaskStarted`, :func:`summary`), and the checks every ``run``
argument passes before anything is spawned. :mod:`hyperhive.bash.tasks`
runs the processes; :mod:`hyperhive.bash.mcp` renders these for the model.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from hyperhive.errors import InvalidRequest, LimitExceeded

__all__ = [
    "MAX_CMD_BYTES",
    "MAX_TIMEOUT_SECS",
    "TAIL_BYTES",
    "TERMINAL",
    "WAIT_CAP_SECS",
    "KillOutcome",
    "TaskRecord",
    "TaskReport",
    "TaskStarted",
    "TaskStatus",
    "TaskTable",
    "check_cmd",
    "check_timeout",
    "check_wait",
    "duration",
    "preview",
    "summary",
]

TaskStatus = Literal["pending", "running", "done", "timed_out", "interrupted", "killed"]
KillOutcome = Literal["cancelled", "signalled", "already_finished"]
TERMINAL: frozenset[str] = frozenset({"done", "timed_out", "interrupted", "killed"})

WAIT_CAP_SECS = 30.0
MAX_TIMEOUT_SECS = 7 * 24 * 3600.0
TAIL_BYTES = 4096
MAX_CMD_BYTES = 128 * 1024  # Linux MAX_ARG_STRLEN: a longer argv string cannot be exec'd


class TaskRecord(BaseModel):
    """One task as persisted in ``tasks.json`` (wall-clock times, seconds)."""

    model_config = ConfigDict(extra="ignore")

    id: str
    cmd: str
    status: TaskStatus = "pending"
    created_at: float
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    timeout_secs: float | None = None
    pid: int | None = None
    identity: str | None = None  # process_identity at spawn: tells our process from a reused pid
    error: str | None = None
    # The terminal todo reached the coordinator (or was deliberately cleared); a host
    # that died in between re-sends it on restart, so no completion is ever lost.
    todo_synced: bool = False


class TaskTable(BaseModel):
    version: Literal[1] = 1
    tasks: list[TaskRecord] = []


@dataclass(frozen=True)
class TaskStarted:
    """``run`` returned before the task ended; its end arrives as a todo."""

    id: str
    stdout_path: Path
    stderr_path: Path


@dataclass(frozen=True)
class TaskReport:
    """What ``status`` (or a ``run`` that saw the end) tells the agent."""

    id: str
    cmd: str
    status: TaskStatus
    exit_code: int | None
    duration_secs: float | None
    stdout_tail: str
    stderr_tail: str
    stdout_path: Path
    stderr_path: Path
    error: str | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


def duration(rec: TaskRecord, now: float) -> float | None:
    if rec.started_at is None:
        return None
    if rec.ended_at is not None:
        return max(0.0, rec.ended_at - rec.started_at)
    return max(0.0, now - rec.started_at) if rec.status == "running" else None


def preview(cmd: str) -> str:
    line = " ".join(cmd.split())
    return line if len(line) <= 120 else line[:119] + "…"


def summary(rec: TaskRecord, stdout_path: Path, stderr_path: Path) -> str:
    """The todo body for a task: its state, exit code, duration and where its output is."""
    head = f"bash task {rec.id} {rec.status}"
    if rec.exit_code is not None:
        head += f" (exit {rec.exit_code})"
    took = duration(rec, time.time())
    if took is not None:
        head += f" after {took:.1f}s"
    lines = [f"{head}: {preview(rec.cmd)}"]
    if rec.error:
        lines.append(rec.error)
    lines += [f"stdout: Read({stdout_path})", f"stderr: Read({stderr_path})"]
    return "\n".join(lines)


def check_cmd(cmd: str) -> str:
    if not cmd.strip():
        raise InvalidRequest("cmd is empty: pass the shell command to run")
    if "\0" in cmd:
        raise InvalidRequest("cmd contains a NUL byte, which no command line can carry")
    size = len(cmd.encode("utf-8"))
    if size >= MAX_CMD_BYTES:
        raise LimitExceeded(
            f"cmd is {size} bytes; the limit is {MAX_CMD_BYTES - 1}: write a script and run it"
        )
    return cmd


def check_timeout(timeout_secs: float | None) -> float | None:
    if timeout_secs is None:
        return None
    if not math.isfinite(timeout_secs) or timeout_secs <= 0:
        raise InvalidRequest(
            f"timeout_secs must be a positive number of seconds, not {timeout_secs!r}; "
            "omit it for no timeout"
        )
    if timeout_secs > MAX_TIMEOUT_SECS:
        raise LimitExceeded(
            f"timeout_secs {timeout_secs:g} is over the 7-day limit ({MAX_TIMEOUT_SECS:g}); "
            "omit it for no timeout"
        )
    return float(timeout_secs)


def check_wait(wait_seconds: float) -> float:
    if math.isnan(wait_seconds) or wait_seconds < 0:
        raise InvalidRequest(f"wait_seconds must be 0 or more, not {wait_seconds!r}")
    return min(float(wait_seconds), WAIT_CAP_SECS)
