"""The ``subagent`` surface (in no group) and ``subagent_control`` (a subagent's own).

Handlers in subagent/mcp.py. ``subagent`` is default-on; an agent's
``[mcp_servers.subagent]`` entry can disable or replace it.
``subagent_control`` is what a subagent's claude gets, under its run token.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from hyperhive.tools.decl import SUBAGENT_CONTROL_SERVER, SUBAGENT_SERVER, Tool, ToolArgs

__all__ = ["CONTROL_TOOLS", "TOOLS", "ContinueArgs", "GoalArgs", "HelpArgs", "IdArgs", "StartArgs"]


class StartArgs(ToolArgs):
    prompt: str = Field(description="A full brief: goal, files, what to report.")
    name: str | None = Field(default=None, description="Your id for it ([a-z0-9-]).")
    model: str | None = Field(
        default=None, description="Default: your subagent_model; larger only if needed."
    )
    dir: str | None = Field(default=None, description="Its working dir, in yours (default work/).")
    prompt_file: str | None = Field(default=None, description="Appended to its system prompt.")


class ContinueArgs(ToolArgs):
    id: str
    prompt: str = Field(description="What to tell it next.")


class IdArgs(ToolArgs):
    id: str


class GoalArgs(ToolArgs):
    summary: str = Field(description="What you achieved, for your parent agent.")


class HelpArgs(ToolArgs):
    question: str = Field(description="What you need to know to go on.")


TOOLS: tuple[Tool[Any, Any], ...] = (
    Tool(
        SUBAGENT_SERVER,
        "start",
        "Delegate bounded work that would fill your context: a claude with your built-ins "
        "and no hive tools, costing a whole session. Returns its id; its end wakes you as "
        "a todo.",
        StartArgs,
        "its id, model and dir (or that it waits for a free claude slot)",
    ),
    Tool(
        SUBAGENT_SERVER,
        "continue",
        "Give a finished subagent its next prompt, same session: cheaper than a new start.",
        ContinueArgs,
        "that it continues (its run number); its result arrives as a todo",
    ),
    Tool(
        SUBAGENT_SERVER,
        "interrupt",
        "Stop a running subagent.",
        IdArgs,
        "that it was interrupted, or was not running",
    ),
    Tool(
        SUBAGENT_SERVER,
        "status",
        "A subagent's state and last output; seeing its end clears its todo.",
        IdArgs,
        "its state, runs and last output",
    ),
)

CONTROL_TOOLS: tuple[Tool[Any, Any], ...] = (
    Tool(
        SUBAGENT_CONTROL_SERVER,
        "goal_reached",
        "Tell your parent agent the goal is reached, with a summary.",
        GoalArgs,
        "that the parent was told; finish your turn",
    ),
    Tool(
        SUBAGENT_CONTROL_SERVER,
        "need_help",
        "Ask your parent agent a question you cannot answer yourself.",
        HelpArgs,
        "that the question went to the parent; end your turn, the answer is your next prompt",
    ),
)
