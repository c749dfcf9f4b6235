"""``execution``: the ``bash`` surface's run, status, kill (spec 001; handlers in bash/mcp.py)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from hyperhive.tools.decl import BASH_SERVER, Tool, ToolArgs
from hyperhive.tools.groups import ToolGroup

__all__ = ["TOOLS", "KillArgs", "RunArgs", "StatusArgs"]


class RunArgs(ToolArgs):
    cmd: str
    timeout_secs: float | None = Field(
        default=None, description="Kill it after N seconds; omit: no limit."
    )
    wait_seconds: float = Field(default=3, description="Up to 30; 0: return at once.")
    name: str | None = Field(default=None, description="Your id for it ([a-z0-9-]).")


class StatusArgs(ToolArgs):
    id: str
    wait_seconds: float = Field(default=0, description="Wait for its end, up to 30 s.")


class KillArgs(ToolArgs):
    id: str
    force: bool = False


_X = ToolGroup.EXECUTION

TOOLS: tuple[Tool[Any, Any], ...] = (
    Tool(
        BASH_SERVER,
        "run",
        "Run a shell command (bash -c) in your workspace. If it ends within wait_seconds "
        "you get its result; else its id: end your turn, its end wakes you as a todo.",
        RunArgs,
        "its status, exit code and the last 4 KiB of stdout and stderr (with the files "
        "holding all of it); or: task started: id=<id>",
        _X,
    ),
    Tool(
        BASH_SERVER,
        "status",
        "A task's state, exit code and last 4 KiB of output; seeing its end clears its todo.",
        StatusArgs,
        "its status, exit code and the last 4 KiB of stdout and stderr",
        _X,
    ),
    Tool(
        BASH_SERVER,
        "kill",
        "Stop a task's process group (SIGINT; force: SIGKILL); its end arrives as a todo.",
        KillArgs,
        "which signal was sent, or that it had already finished or was cancelled",
        _X,
    ),
)
