"""Turn records: what the agent host keeps of every turn, and the coordinator's asks for them.

A record lives on the host that ran the turn (``agents/<name>/turns/``, the
host's own directory, which the agent cannot write), so the coordinator reads
it over that host's link like a log (#14: no shared disk). A turn id names its
agent (``<agent>.<when>-<random>``), so a ``show`` is routed without a lookup.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from hyperhive.protocol.base import Req, _Out
from hyperhive.protocol.hostreads import AGENT_NAME, Ask

__all__ = [
    "TURN_ID",
    "OpTurnShowReq",
    "OpTurnsListReq",
    "OpTurnsSearchReq",
    "TurnHit",
    "TurnRecord",
    "TurnShowAsk",
    "TurnStep",
    "TurnSummary",
    "TurnsAsk",
    "TurnsListAsk",
    "TurnsSearchAsk",
    "agent_of_turn",
]

TURN_ID = r"^[a-z][a-z0-9-]{0,63}\.[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}$"
TurnId = Field(pattern=TURN_ID, max_length=100)
SEARCH_TEXT = Field(min_length=1, max_length=500)


def agent_of_turn(turn_id: str) -> str:
    """The agent a turn id names (the part before its first dot)."""
    return turn_id.partition(".")[0]


class TurnSummary(_Out):
    """One turn as a list shows it. ``outcome`` is a plain string (``ok``, ``error``,
    ``interrupted``…); ``None`` while the turn runs, ``unfinished`` when its host died
    mid-turn. ``cost_usd`` is what spend counted the run at (``None``: not counted)."""

    id: str
    agent: str
    kind: Literal["turn", "compaction"]
    started: float
    ended: float | None = None
    wake_reason: str
    outcome: str | None = None
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    model_calls: int = 0
    tools: list[str] = Field(default_factory=list)
    session_id: str | None = None
    model: str | None = None
    bytes: int = 0


class TurnStep(_Out):
    """One step of a turn, in order: a prompt, a model text, a tool call (``text`` is its
    input as JSON), a tool result. ``parent`` is the tool call a subagent's step belongs
    to; ``truncated``: ``text`` is cut at the index's size, the whole is on the host."""

    seq: int
    at: float
    kind: Literal["prompt", "text", "tool_use", "tool_result"]
    text: str
    size: int
    truncated: bool = False
    call_id: str | None = None
    name: str | None = None
    parent: str | None = None
    is_error: bool = False


class TurnRecord(_Out):
    """A turn whole (or a page of its steps: ``next_seq`` says where to go on)."""

    turn: TurnSummary
    wake: dict[str, JsonValue]
    prompt: str
    steps: list[TurnStep]
    subagents: list[str] = Field(default_factory=list)  # tool-call ids of subagent runs
    next_seq: int | None = None


class TurnHit(_Out):
    """A search match: the turn, the step, and the matched text around the match."""

    turn: TurnSummary
    seq: int
    kind: str
    snippet: str


# ---- coordinator → host asks ----------------------------------------------------------


class TurnsListAsk(Ask[list[TurnSummary]]):
    """``agent``'s turns, newest first, started at or after ``since`` (epoch seconds)."""

    cmd: Literal["turns_list"]
    agent: AGENT_NAME
    since: float | None = None
    limit: int = Field(default=50, ge=1, le=1000)


class TurnShowAsk(Ask[TurnRecord]):
    """One turn, its steps from ``after_seq`` on (as many as fit one answer); ``full``:
    step texts whole, from the host's disk, not cut at the index's size."""

    cmd: Literal["turn_show"]
    agent: AGENT_NAME
    turn: str = TurnId
    after_seq: int = Field(default=-1, ge=-1)
    full: bool = False


class TurnsSearchAsk(Ask[list[TurnHit]]):
    """Turns of ``agent`` (``None``: every agent this host keeps records of) whose tool
    inputs, results or texts match ``text``, newest first."""

    cmd: Literal["turns_search"]
    text: str = SEARCH_TEXT
    agent: AGENT_NAME | None = None
    limit: int = Field(default=50, ge=1, le=500)


TurnsAsk = TurnsListAsk | TurnShowAsk | TurnsSearchAsk
"""This module's asks, as members of the host link's ``LinkCommand``."""


# ---- the operator's requests ------------------------------------------------------------


class OpTurnsListReq(Req[list[TurnSummary]]):
    cmd: Literal["turns_list"]
    agent: str
    since: float | None = None
    limit: int = Field(default=50, ge=1, le=1000)


class OpTurnShowReq(Req[TurnRecord]):
    cmd: Literal["turn_show"]
    turn: str = Field(max_length=100)
    after_seq: int = Field(default=-1, ge=-1)
    full: bool = False


class OpTurnsSearchReq(Req[list[TurnHit]]):
    cmd: Literal["turns_search"]
    text: str = SEARCH_TEXT
    agent: str | None = None
    limit: int = Field(default=50, ge=1, le=500)
