"""The agent-host link: host → coordinator requests, coordinator → host commands."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
    JsonValue,
)

from hyperhive.config import AgentConfig
from hyperhive.protocol.base import Req, TurnStateName, _Out
from hyperhive.protocol.hostdisk import HostDiskAsk
from hyperhive.protocol.hostreads import (
    Ask,
    HostReadAsk,
    LinkAnswerReq,
    LinkStreamEndReq,
    LinkStreamItemsReq,
    StreamCommand,
)
from hyperhive.protocol.move import (
    LinkMoveDroppedReq,
    LinkMoveGetReq,
    LinkMovePackedReq,
    LinkMovePutReq,
    LinkMoveUnpackedReq,
    MoveDropCmd,
    MoveInCmd,
    MoveOutCmd,
)
from hyperhive.protocol.snapshot import (
    LinkSnapshotCommitReq,
    LinkSnapshotGetReq,
    LinkSnapshotPutReq,
)
from hyperhive.protocol.steer import InterruptAsk
from hyperhive.protocol.turns import TurnsAsk
from hyperhive.protocol.wire import Response

__all__ = [
    "ActivateCmd",
    "DeactivateCmd",
    "HostCapacity",
    "Lease",
    "LinkAbandonReq",
    "LinkAgentCrashedReq",
    "LinkAgentStartedReq",
    "LinkAgentStateReq",
    "LinkCommand",
    "LinkForwardReq",
    "LinkGoodbyeReq",
    "LinkHeartbeatReq",
    "LinkRegisterReq",
    "LinkRequest",
    "MetaChangedAsk",
    "PlaceCmd",
    "Registered",
    "Versions",
]

# ---- agent-host link ------------------------------------------------------


class Registered(_Out):
    host_id: str
    # This registration's link epoch (monotonic per host): a superseded link is fenced.
    epoch: int = 0
    # How often to heartbeat; ``None``: no lease (a local host: its socket is its life).
    heartbeat_seconds: float | None = None
    # The hive's id: the host names its agents' system users ``hh-<hive id>-<agent>``
    # with it, as the coordinator's machine would (``None``: an older coordinator).
    hive_id: str | None = Field(default=None, pattern=r"^[a-z0-9]{1,32}$")


class Versions(_Out):
    """What an agent host runs: hyperhive and the claude CLI (``None``: claude did not say)."""

    hive: str = Field(min_length=1, max_length=64)
    claude: str | None = Field(default=None, max_length=64)


class LinkRegisterReq(Req[Registered]):
    cmd: Literal["register"]
    host_id: str = Field(min_length=1, max_length=64)
    pid: int | None = None
    claude_slots: int | None = Field(default=None, ge=1)  # how many claudes it runs at once
    max_agents: int | None = Field(default=None, ge=0)  # the most agents placement gives it
    # The agents this host runs now (a host coming back says what it still holds, so
    # the coordinator can fence those it no longer does).
    agents: list[str] = Field(default_factory=list, max_length=100_000)


class HostCapacity(_Out):
    """What a host can take: claude slots and memory (bytes), as it last reported."""

    claude_slots: int | None = Field(default=None, ge=1)
    slots_in_use: int = Field(default=0, ge=0)
    mem_total: int | None = Field(default=None, ge=0)
    mem_available: int | None = Field(default=None, ge=0)


class Lease(_Out):
    """The host's lease, renewed: it holds its agents until ``expires_at``."""

    epoch: int
    expires_at: float


class LinkHeartbeatReq(Req[Lease]):
    """Renew the host's lease and report its capacity (sent every ``heartbeat_seconds``)."""

    cmd: Literal["heartbeat"]
    capacity: HostCapacity
    # What it runs now (a claude upgraded in place shows here), and the agents it runs
    # that started on other versions, with those versions (they need a restart).
    versions: Versions | None = None
    outdated: dict[str, Versions] = Field(default_factory=dict, max_length=100_000)


class LinkAgentStateReq(Req[None]):
    """The host reports an agent's turn state (Idle/WaitingSlot/Thinking/Compacting).

    ``waiting_slot``: woken, queued for one of the host's claude slots since ``since``.
    A report of an incarnation other than the agent's current one is ignored.
    """

    cmd: Literal["agent_state"]
    agent: str
    turn_state: TurnStateName
    since: float
    needs_login: bool = False
    # Why the host cannot start this agent's claude (and what to do): no turns until fixed.
    launch_problem: str | None = None
    # The activation reporting: a runtime the coordinator has since replaced (its last
    # "stopped" arrives after the next activation) is not the agent's state any more.
    incarnation: int | None = None


class LinkAgentCrashedReq(Req[None]):
    """The host's runtime of ``agent`` ended on its own.

    ``incarnation``: the activation that crashed; a report for an earlier one
    than the coordinator's (it was fenced or replaced meanwhile) is ignored.
    """

    cmd: Literal["agent_crashed"]
    agent: str
    reason: str
    incarnation: int | None = None


class LinkAgentStartedReq(Req[None]):
    """An agent started on this host (not a re-sent activation of one already running),
    running these versions: the coordinator records them as the agent's."""

    cmd: Literal["agent_started"]
    agent: str
    incarnation: int
    versions: Versions


class LinkGoodbyeReq(Req[None]):
    """The host is stopping on purpose: its agents stopping is not a crash."""

    cmd: Literal["goodbye"]


class LinkForwardReq(Req[Response]):
    """One frame an agent sent on the socket its host serves, forwarded to the coordinator.

    Accepted only from the host that holds ``agent`` at the activation
    ``incarnation`` it was given (the coordinator checks; the body is not
    trusted). The result is the agent's own response, its id the frame's.
    """

    cmd: Literal["forward"]
    agent: str = Field(min_length=1, max_length=64)
    incarnation: int
    frame: dict[str, JsonValue]
    conn: int = 0  # which of the agent's connections to its socket sent it (for ``abandon``)


class LinkAbandonReq(Req[None]):
    """One of an agent's connections to its host-served socket closed: drop its frames
    still in flight (a long-poll must not take mail for a reader that is gone), exactly
    as a closed unix connection cancels its requests."""

    cmd: Literal["abandon"]
    agent: str
    conn: int


LinkRequest = Annotated[
    LinkRegisterReq
    | LinkAgentStateReq
    | LinkAgentCrashedReq
    | LinkAgentStartedReq
    | LinkGoodbyeReq
    | LinkForwardReq
    | LinkAbandonReq
    | LinkMovePutReq
    | LinkMovePackedReq
    | LinkMoveGetReq
    | LinkMoveUnpackedReq
    | LinkMoveDroppedReq
    | LinkHeartbeatReq
    | LinkSnapshotPutReq
    | LinkSnapshotCommitReq
    | LinkSnapshotGetReq
    # The coordinator's reads of the host (protocol.hostreads):
    | LinkAnswerReq
    | LinkStreamItemsReq
    | LinkStreamEndReq,
    Field(discriminator="cmd"),
]


class ActivateCmd(Req[None]):
    cmd: Literal["activate"]
    agent: str
    config: AgentConfig
    parent: str | None = None
    descendants: list[str] = Field(default_factory=list)
    incarnation: int = 0
    # A replacement (its host was lost, ``on_host_loss = "replace"``): restore its last
    # snapshot before its first turn.
    restore: bool = False


class DeactivateCmd(Req[None]):
    cmd: Literal["deactivate"]
    agent: str
    graceful: bool = True
    # Set when the host is fenced: it no longer holds the agent (its lease expired, or
    # the agent runs elsewhere now), so it must stop it without acking anything.
    fenced: str | None = None


class PlaceCmd(Req[None]):
    """The agent's place in the tree changed (a reparent): it keeps running, and its
    next turn, bash task or subagent sees the new parent and descendants."""

    cmd: Literal["place"]
    agent: str
    parent: str | None = None
    descendants: list[str] = Field(default_factory=list)


class MetaChangedAsk(Ask[None]):
    """Something the agent's ``get_agent_meta`` shows changed (its status): its host
    drops the answer it keeps, then answers ask ``ask`` (``LinkAnswerReq``), so the
    coordinator can hold the change's reply until no stale answer can follow it."""

    cmd: Literal["meta_changed"]
    agent: str


LinkCommand = Annotated[
    # Commands: done in order, no answer.
    ActivateCmd
    | DeactivateCmd
    | PlaceCmd
    | MoveOutCmd
    | MoveInCmd
    | MoveDropCmd
    | StreamCommand
    # Asks (``protocol.hostreads.Ask``): each answered once, by ``answer``, off the loop.
    | MetaChangedAsk
    | InterruptAsk
    | HostReadAsk
    | HostDiskAsk
    | TurnsAsk,
    Field(discriminator="cmd"),
]
"""What the coordinator pushes to an agent host: one handler each in the host's sealed
table (``agent/hostasks.py``), whose return type is the member's declared answer."""
