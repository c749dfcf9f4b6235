"""Helper events: lifecycle notices delivered to the submitting agent.

An event reaches the model as :func:`describe`'s sentence (what happened,
then what to do next), not as the JSON of the model: the model should not
have to decode a wire format to know its next step. The ``[<event>]`` head
keeps the kind greppable in logs and inboxes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    Field,
)

from hyperhive.protocol.base import _Out
from hyperhive.tools.groups import ToolGroup

__all__ = [
    "ApprovalResolved",
    "ConfigReady",
    "ContainerCrash",
    "Destroyed",
    "HelperEvent",
    "HostLost",
    "INBOX_EVENTS",
    "Killed",
    "LOST_NAMED",
    "LoggedIn",
    "LostAgent",
    "NeedsLogin",
    "NeedsUpdate",
    "Rebuilt",
    "Spawned",
    "describe",
]

# ---- helper events --------------------------------------------------------


class _Event(_Out):
    agent: str

    @property
    def key(self) -> str:
        """The todo this event is filed as (for a recipient, one per kind and agent)."""
        return f"{self.model_dump()['event']}:{self.agent}"


class ContainerCrash(_Event):
    event: Literal["container_crash"] = "container_crash"
    reason: str = ""


class ApprovalResolved(_Event):
    event: Literal["approval_resolved"] = "approval_resolved"
    approval_id: int
    approved: bool
    reason: str = ""


class Spawned(_Event):
    event: Literal["spawned"] = "spawned"


class Rebuilt(_Event):
    event: Literal["rebuilt"] = "rebuilt"


class Killed(_Event):
    event: Literal["killed"] = "killed"


class Destroyed(_Event):
    event: Literal["destroyed"] = "destroyed"


class NeedsLogin(_Event):
    event: Literal["needs_login"] = "needs_login"


class LoggedIn(_Event):
    event: Literal["logged_in"] = "logged_in"


class NeedsUpdate(_Event):
    """Its host now runs other versions than the agent started with (upgraded under it)."""

    event: Literal["needs_update"] = "needs_update"
    behind: str = ""  # what changed, e.g. "claude 2.1.328 → 2.1.400"


class ConfigReady(_Event):
    event: Literal["config_ready"] = "config_ready"


class LostAgent(_Out):
    """One agent of a lost host, and what became of it."""

    agent: str
    # waits: for its host to come back; replaced: re-placed on ``host``; stuck: to be
    # re-placed, but no other host is connected yet.
    outcome: Literal["waits", "replaced", "stuck"] = "waits"
    host: str | None = None


class HostLost(_Out):
    """A host went with several agents of one manager: one notice for them all.

    ``died``: a local host's process ended (its agents start again when it is
    back); ``lease_expired``: a remote host went silent past its lease.
    """

    event: Literal["host_lost"] = "host_lost"
    host: str
    cause: Literal["died", "lease_expired"]
    agents: list[LostAgent]

    @property
    def key(self) -> str:
        return f"host_lost:{self.host}"


HelperEvent = Annotated[
    ContainerCrash
    | ApprovalResolved
    | Spawned
    | Rebuilt
    | Killed
    | Destroyed
    | NeedsLogin
    | LoggedIn
    | NeedsUpdate
    | ConfigReady
    | HostLost,
    Field(discriminator="event"),
]

# Inbox-worthy events go to the submitter's inbox; the rest become todos.
INBOX_EVENTS = frozenset({"container_crash", "approval_resolved", "host_lost"})
# The most agents a host_lost notice names; the rest are counted.
LOST_NAMED = 20


def _crash(e: ContainerCrash, groups: Collection[ToolGroup]) -> str:
    why = f": {e.reason}" if e.reason else ""
    log = "Read its log (get_logs), then restart" if ToolGroup.DIAGNOSTICS in groups else "Restart"
    return (
        f"{e.agent} crashed{why}. {log} it or fix its config; tell the operator if it keeps "
        "crashing."
    )


def _names(agents: list[str]) -> str:
    more = f" and {len(agents) - LOST_NAMED} more" if len(agents) > LOST_NAMED else ""
    return ", ".join(agents[:LOST_NAMED]) + more


def _host_lost(e: HostLost, groups: Collection[ToolGroup]) -> str:
    if e.cause == "died":
        return (
            f"Agent host {e.host} stopped, and with it {_names([a.agent for a in e.agents])}. "
            "They start again when it is back, their unfinished mail redelivered; if it "
            "stays down, tell the operator."
        )
    parts = []
    waits = [a.agent for a in e.agents if a.outcome == "waits"]
    if waits:
        parts.append(f"{_names(waits)} wait for it to come back (on_host_loss = wait)")
    parts.extend(
        f"{a.agent} runs again on {a.host} with its notes and session as of its last "
        "turn (a turn it was in is redelivered)"
        for a in e.agents
        if a.outcome == "replaced"
    )
    stuck = [a.agent for a in e.agents if a.outcome == "stuck"]
    if stuck:
        parts.append(f"{_names(stuck)} start on another host once one connects")
    return (
        f"Agent host {e.host} is lost (its lease expired): " + "; ".join(parts) + ". "
        "Tell whoever waits on their work; the operator sees the host."
    )


def _resolved(e: ApprovalResolved, groups: Collection[ToolGroup]) -> str:
    why = f" ({e.reason})" if e.reason else ""
    if e.approved:
        return (
            f"Your approval #{e.approval_id} for {e.agent} was approved{why} and applied. "
            f"If it spawned {e.agent}, it starts idle: send it its task."
        )
    return (
        f"Your approval #{e.approval_id} for {e.agent} was denied{why}. Change the request "
        "and ask again, or tell whoever was waiting on it."
    )


def _config_ready(e: ConfigReady, groups: Collection[ToolGroup]) -> str:
    how = (
        ": edit its agent.toml there and request_apply_commit to change it"
        if ToolGroup.APPROVALS in groups
        else ""
    )
    return f"{e.agent}'s proposed config repo is ready{how}."


# Each sentence names only tools the recipient (holding ``groups``) has.
_DESCRIBE: dict[type[BaseModel], Callable[[Any, Collection[ToolGroup]], str]] = {
    ContainerCrash: _crash,
    ApprovalResolved: _resolved,
    HostLost: _host_lost,
    Spawned: lambda e, g: f"{e.agent} was spawned and is idle: send it its task.",
    Rebuilt: lambda e, g: f"{e.agent} was rebuilt with its applied config and is running again.",
    Killed: lambda e, g: f"{e.agent} was stopped; its mail waits until start brings it back.",
    Destroyed: lambda e, g: f"{e.agent} was destroyed for good; stop sending it work.",
    NeedsLogin: lambda e, g: (
        f"{e.agent} cannot reach the model (claude needs a login or API key); tell the operator."
    ),
    LoggedIn: lambda e, g: f"{e.agent} is logged in again and back at work.",
    NeedsUpdate: lambda e, g: (
        f"{e.agent} runs older versions than its host now has"
        + (f" ({e.behind})" if e.behind else "")
        + (
            f". Restart {e.agent} when its work allows; that brings it up to date."
            if ToolGroup.LIFECYCLE in g
            else f". Ask the operator to restart {e.agent}; that brings it up to date."
        )
    ),
    ConfigReady: _config_ready,
}


# Checked at import: every helper event has its sentence.
_MISSING = set(get_args(get_args(HelperEvent)[0])) - set(_DESCRIBE)
if _MISSING:
    raise TypeError(f"helper events without a description: {_MISSING}")


def describe(event: BaseModel, groups: Collection[ToolGroup] = ToolGroup.ALL) -> str:
    """``[<event>] <what happened>. <what to do next>.`` for a recipient holding ``groups``
    to read (it names no tool the recipient lacks). Pure."""
    render = _DESCRIBE.get(type(event))
    if render is None:
        raise TypeError(f"not a helper event: {type(event).__name__}")
    kind = getattr(event, "event", None)
    return f"[{kind}] {render(event, groups)}"
