"""What the coordinator reads from the host that holds an agent, over the host link.

An agent's log, its host's own journal, its live turn state and turn stream
live on the host's disk and in its memory, not the coordinator's (#14: no
shared disk). Two shapes, both pushed to the host like ``activate``:

- an *ask* (``log_tail``, ``host_journal``, ``agent_snapshot``) carries an
  ``ask`` number; the host answers it once with the ``answer`` request;
- a *stream* (``events_follow``) carries a ``stream`` number; the host sends
  ``stream_items`` one batch at a time, each acknowledged before the next
  (the coordinator holds the acknowledgement while its reader is behind:
  backpressure, with a bounded queue), until ``stream_end`` or the
  coordinator's ``stream_stop``.

A host may answer only the asks and feed only the streams opened on its own
link: the coordinator checks, the numbers are not trusted.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from hyperhive.protocol.base import Req, _Out, _Req
from hyperhive.protocol.wire import ErrorInfo

__all__ = [
    "AGENT_NAME",
    "AgentSnapshot",
    "AgentSnapshotAsk",
    "EventsFollowCmd",
    "HostJournalAsk",
    "HostReadCommand",
    "HostTail",
    "LinkAnswerReq",
    "LinkStreamEndReq",
    "LinkStreamItemsReq",
    "LogTailAsk",
    "StreamStopCmd",
]

# Asked of a host by name, so the name must be one (a path is built from it there).
AGENT_NAME = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,63}$")]
# The most events one ``stream_items`` batch carries.
MAX_BATCH = 256


class LogTailAsk(_Req):
    """The last ``lines`` of ``agent``'s log, or (``after``) the lines written since a
    cursor the host handed out, waiting up to ``wait`` seconds for one."""

    cmd: Literal["log_tail"]
    ask: int
    agent: AGENT_NAME
    lines: int = Field(default=100, ge=0, le=5000)
    after: str | None = Field(default=None, max_length=200)
    wait: float = Field(default=0.0, ge=0.0, le=30.0)


class HostTail(_Out):
    """A host's answer to ``log_tail``: the lines, and where to go on from."""

    lines: list[str]
    cursor: str
    found: bool  # whether this host has a log for the agent at all


class HostJournalAsk(_Req):
    """The host's own log, last ``lines`` of it."""

    cmd: Literal["host_journal"]
    ask: int
    lines: int = Field(default=100, ge=1, le=5000)


class AgentSnapshotAsk(_Req):
    """``agent``'s authoritative turn state, as the host's per-agent API shows it."""

    cmd: Literal["agent_snapshot"]
    ask: int
    agent: AGENT_NAME


class AgentSnapshot(BaseModel):
    model_config = ConfigDict(extra="allow")
    turn_state: str
    turn_state_since: float


class EventsFollowCmd(_Req):
    """Stream ``agent``'s turn events (its kept history first) as ``stream_items``."""

    cmd: Literal["events_follow"]
    stream: int
    agent: AGENT_NAME


class StreamStopCmd(_Req):
    """The coordinator's reader went away: stop feeding ``stream``."""

    cmd: Literal["stream_stop"]
    stream: int


HostReadCommand = LogTailAsk | HostJournalAsk | AgentSnapshotAsk | EventsFollowCmd | StreamStopCmd


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
