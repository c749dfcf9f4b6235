"""Turn records: what the agent host keeps of every turn, and the coordinator's asks for them.

A record lives on the host that ran the turn (``agents/<name>/turns/``, the
host's own directory, which the agent cannot write), so the coordinator reads
it over that host's link like a log (#14: no shared disk). A turn id names its
agent (``<agent>.<when>-<random>``), so a ``show`` is routed without a lookup.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hyperhive.protocol.base import Req
from hyperhive.protocol.hostreads import AGENT_NAME, Ask
from hyperhive.turnview import (
    TURN_ID,
    TurnHit,
    TurnRecord,
    TurnStep,
    TurnSummary,
    agent_of_turn,
)

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

TurnId = Field(pattern=TURN_ID, max_length=100)
SEARCH_TEXT = Field(min_length=1, max_length=500)


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
