"""What the coordinator reads from the host that holds an agent, over the host link.

An agent's log, its host's own journal, its live turn state and turn stream
live on the host's disk and in its memory, not the coordinator's (#14: no
shared disk). Two shapes, both pushed to the host like ``activate``:

- an *ask* (an :class:`Ask`: ``log_tail``, ``host_journal``, ``agent_snapshot``,
  and those of :mod:`.hostdisk`) carries an ``ask`` number and names the model
  of its answer (``class LogTailAsk(Ask[HostTail])``); the host answers it once
  with the ``answer`` request, whose ``result`` the coordinator validates into
  that model (``core/hostcalls.py``);
- a *stream* (``events_follow``) carries a ``stream`` number; the host sends
  ``stream_items`` one batch at a time, each acknowledged before the next
  (the coordinator holds the acknowledgement while its reader is behind:
  backpressure, with a bounded queue), until ``stream_end`` or the
  coordinator's ``stream_stop``.

A host may answer only the asks and feed only the streams opened on its own
link: the coordinator checks, the numbers are not trusted.
"""

from __future__ import annotations

from typing import Annotated, Generic, Literal, TypeVar

from pydantic import Field, JsonValue

from hyperhive.protocol.base import MatrixAccountView, Req, TurnStateName, _Out
from hyperhive.protocol.wire import ErrorInfo

__all__ = [
    "AGENT_NAME",
    "AgentSnapshot",
    "AgentSnapshotAsk",
    "Ask",
    "EventsFollowCmd",
    "HostJournalAsk",
    "HostReadAsk",
    "HostTail",
    "LinkAnswerReq",
    "LinkStreamEndReq",
    "LinkStreamItemsReq",
    "LogTailAsk",
    "StreamCommand",
    "StreamStopCmd",
]

# Asked of a host by name, so the name must be one (a path is built from it there).
AGENT_NAME = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,63}$")]
# The most events one ``stream_items`` batch carries.
MAX_BATCH = 256

R = TypeVar("R")


class Ask(Req[R], Generic[R]):
    """A coordinator → host ask: answered once, by ``answer`` with this ``ask`` number,
    with an ``R`` (the host's table checks its handler returns one)."""

    cmd: str  # each ask's own literal: the union's discriminator
    ask: int

    def subject(self) -> str:
        """What it is about, for an error message: `` for <agent>``, or nothing."""
        agent = getattr(self, "agent", None)
        return f" for {agent}" if isinstance(agent, str) else ""


class HostTail(_Out):
    """A host's answer to ``log_tail``: the lines, and where to go on from."""

    lines: list[str]
    cursor: str
    found: bool  # whether this host has a log for the agent at all


class LogTailAsk(Ask[HostTail]):
    """The last ``lines`` of ``agent``'s log, or (``after``) the lines written since a
    cursor the host handed out, waiting up to ``wait`` seconds for one."""

    cmd: Literal["log_tail"]
    agent: AGENT_NAME
    lines: int = Field(default=100, ge=0, le=5000)
    after: str | None = Field(default=None, max_length=200)
    wait: float = Field(default=0.0, ge=0.0, le=30.0)


class HostJournalAsk(Ask[list[str]]):
    """The host's own log, last ``lines`` of it."""

    cmd: Literal["host_journal"]
    lines: int = Field(default=100, ge=1, le=5000)


class AgentSnapshot(_Out):
    """An agent's turn state as its host holds it (the per-agent API's ``/state``)."""

    agent: str
    turn_state: TurnStateName
    turn_state_since: float
    last_turn: dict[str, JsonValue] | None = None  # outcome, cost_usd, num_turns, usage
    context_usage: float | None = None
    session_id: str | None = None
    status_text: str = ""
    matrix: MatrixAccountView | None = None  # its Matrix account, when it has one


class AgentSnapshotAsk(Ask[AgentSnapshot]):
    """``agent``'s authoritative turn state, as the host's per-agent API shows it."""

    cmd: Literal["agent_snapshot"]
    agent: AGENT_NAME


class EventsFollowCmd(Req[None]):
    """Stream ``agent``'s turn events (its kept history first) as ``stream_items``."""

    cmd: Literal["events_follow"]
    stream: int
    agent: AGENT_NAME


class StreamStopCmd(Req[None]):
    """The coordinator's reader went away: stop feeding ``stream``."""

    cmd: Literal["stream_stop"]
    stream: int


HostReadAsk = LogTailAsk | HostJournalAsk | AgentSnapshotAsk
"""This module's asks, as members of the host link's ``LinkCommand``."""

StreamCommand = EventsFollowCmd | StreamStopCmd
"""This module's stream commands, likewise."""


class LinkAnswerReq(Req[None]):
    """The host's one answer to ask ``ask``: a result, or the error it met."""

    cmd: Literal["answer"]
    ask: int
    result: JsonValue = None
    error: ErrorInfo | None = None


class LinkStreamItemsReq(Req[None]):
    """The next batch of stream ``stream``; answered once the coordinator has room."""

    cmd: Literal["stream_items"]
    stream: int
    items: list[dict[str, JsonValue]] = Field(max_length=MAX_BATCH)


class LinkStreamEndReq(Req[None]):
    """Stream ``stream`` is over on the host's side (the agent stopped), and why."""

    cmd: Literal["stream_end"]
    stream: int
    reason: str = Field(max_length=2000)
