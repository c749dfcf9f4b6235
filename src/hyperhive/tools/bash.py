"""``execution``: the ``bash`` surface's run, status, kill (spec 001; handlers in bash/mcp.py)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from hyperhive.tools.decl import BASH_SERVER, Tool, ToolArgs
from hyperhive.tools.groups import ToolGroup

__all__ = ["TOOLS", "KillArgs", "RunArgs", "StatusArgs"]


class RunArgs(ToolArgs):
    cmd: str = Field(description="The shell command (bash -c, in your workspace).")
    timeout_secs: float | None = Field(
        default=None, description="Kill it after N seconds (status timed_out); omit: no limit."
    )
    wait_seconds: float = Field(
        default=3, description="Wait up to N seconds (max 30) for it to end; 0: return at once."
    )
    name: str | None = Field(
        default=None,
        description="Your id for it ([a-z0-9-], ≤ 63 chars), reusable once it finished.",
    )


class StatusArgs(ToolArgs):
    id: str = Field(description="The task id.")
    wait_seconds: float = Field(default=0, description="Wait up to N seconds (max 30) for the end.")


class KillArgs(ToolArgs):
    id: str = Field(description="The task id.")
    force: bool = Field(default=False, description="SIGKILL instead of SIGINT.")


_X = ToolGroup.EXECUTION

TOOLS: tuple[Tool[Any, Any], ...] = (
    Tool(
        BASH_SERVER,
        "run",
        "Run a shell command in the background. Ends within wait_seconds: you get its "
        "result. Else `task started: id=<id>`: end your turn; its end arrives as a todo "
        "(subsystem bash, key = id) that wakes you.",
        RunArgs,
        "its status, exit code and the last 4 KiB of stdout and stderr (with the files "
        "holding all of it); or: task started: id=<id>",
        _X,
    ),
    Tool(
        BASH_SERVER,
        "status",
        "A task's state (pending, running, done, timed_out, interrupted, killed), exit "
        "code and last 4 KiB of output. Seeing its end clears its todo.",
        StatusArgs,
        "its status, exit code and the last 4 KiB of stdout and stderr",
        _X,
    ),
    Tool(
        BASH_SERVER,
        "kill",
        "Stop a task's whole process group (SIGINT; force: SIGKILL) or cancel a pending "
        "one; returns at once, its end arrives as a todo.",
        KillArgs,
        "which signal was sent, or that it had already finished or was cancelled",
        _X,
    ),
)
