"""The ``subagent`` and ``subagent_control`` MCP surfaces.

``subagent`` (``/agents/<X>/mcp/subagent``, the agent's token): ``start``,
``continue``, ``interrupt``, ``status``. Default-on and in no tool group (as
in the spec); the agent's ``[mcp_servers.subagent]`` entry can disable or
replace it, and then this surface refuses the agent too.

``subagent_control`` (``/agents/<X>/mcp/subagent_control``): what a
subagent's own claude gets — ``goal_reached(summary)`` and
``need_help(question)``. It accepts no agent token, only the per-run token
of one of X's running subagents (see :mod:`hyperhive.subagent.session`);
the principal stamped into the request is ``<agent>/<subagent id>``, which
is how a signal knows its sender. Both signals become todos for the parent.

Declared in :mod:`hyperhive.tools.subagent`; the handlers here are bound by name.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hyperhive.agent.active import ActiveAgent
from hyperhive.agent.events import EventsBus
from hyperhive.agent.mcp_surface import Handler, Surface, SurfaceAgent, builtin_gate
from hyperhive.permissions import (
    SUBAGENT_CONTROL_SERVER,
    SUBAGENT_SERVER,
    Capability,
    ToolGroup,
)
from hyperhive.subagent.records import render_status
from hyperhive.subagent.session import SubagentManager
from hyperhive.tools.subagent import (
    CONTROL_TOOLS,
    TOOLS,
    ContinueArgs,
    GoalArgs,
    HelpArgs,
    IdArgs,
    StartArgs,
)

__all__ = [
    "CONTROL_HANDLERS",
    "HANDLERS",
    "ControlCaller",
    "control_surface",
    "subagent_surface",
]


async def _start(agent: ActiveAgent, a: StartArgs) -> str:
    rec = await agent.subagents.start(a.prompt, a.name, a.model, a.dir, a.prompt_file)
    verb = "queued for a free claude slot" if rec.waiting_since is not None else "started"
    return (
        f"subagent {verb}: id={rec.id} (model {rec.model or agent.config.subagent_model}, "
        f"dir {rec.cwd})\nIts result, goal_reached and need_help arrive as todos; "
        f"status({rec.id!r}) meanwhile."
    )


async def _continue(agent: ActiveAgent, a: ContinueArgs) -> str:
    rec = await agent.subagents.resume(a.id, a.prompt)
    return (
        f"subagent {rec.id} continues in its session (run {rec.runs}); its result arrives as a todo"
    )


async def _interrupt(agent: ActiveAgent, a: IdArgs) -> str:
    if await agent.subagents.interrupt(a.id):
        return f"subagent {a.id} interrupted (its process group is stopped); continue() resumes it"
    return f"subagent {a.id} was not running; status({a.id!r}) has its result"


async def _status(agent: ActiveAgent, a: IdArgs) -> str:
    return render_status(await agent.subagents.status(a.id), time.time())


HANDLERS: dict[str, Handler] = {
    "start": _start,
    "continue": _continue,
    "interrupt": _interrupt,
    "status": _status,
}


def subagent_surface(lookup: Callable[[str], SurfaceAgent | None]) -> Surface:
    """The host's ``subagent`` surface (``/agents/<X>/mcp/subagent``)."""
    return Surface(SUBAGENT_SERVER, TOOLS, HANDLERS, lookup, gate=builtin_gate(SUBAGENT_SERVER))


# ---- subagent_control ---------------------------------------------------------------


@dataclass
class ControlCaller:
    """A running subagent calling its control surface (a SurfaceAgent with no groups)."""

    name: str  # "<agent>/<subagent id>", as logged and put on the parent's bus
    bus: EventsBus
    manager: SubagentManager
    subagent_id: str
    groups: tuple[ToolGroup, ...] = field(default=())
    capabilities: tuple[Capability, ...] = field(default=())


async def _goal_reached(caller: ControlCaller, a: GoalArgs) -> str:
    await caller.manager.signal(caller.subagent_id, "goal_reached", a.summary)
    return "your parent agent has been told; finish your turn now"


async def _need_help(caller: ControlCaller, a: HelpArgs) -> str:
    await caller.manager.signal(caller.subagent_id, "need_help", a.question)
    return (
        "your question went to your parent agent; end your turn now — "
        "its answer arrives as your next prompt"
    )


CONTROL_HANDLERS: dict[str, Handler] = {"goal_reached": _goal_reached, "need_help": _need_help}


def control_surface(agents: Callable[[str], ActiveAgent | None]) -> Surface:
    """The host's ``subagent_control`` surface; identity = a running subagent's token."""

    def authenticate(agent: ActiveAgent, token: str) -> str | None:
        sid = agent.subagents.authenticate(token)
        return f"{agent.name}/{sid}" if sid is not None else None

    def lookup(principal: str) -> ControlCaller | None:
        name, _, sid = principal.partition("/")
        agent = agents(name)
        if agent is None or not agent.subagents.running(sid):
            return None
        return ControlCaller(principal, agent.bus, agent.subagents, sid)

    return Surface(
        SUBAGENT_CONTROL_SERVER, CONTROL_TOOLS, CONTROL_HANDLERS, lookup, authenticate=authenticate
    )
