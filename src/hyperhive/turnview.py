"""A turn record as every reader sees it (the CLI, the dashboard, the ``get_turns`` tool):
pure models, shared by the host link's asks (:mod:`hyperhive.protocol.turns`) and the
tool declarations. A turn id names its agent: ``<agent>.<UTC time>-<random>``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from hyperhive.wirebase import _Out

__all__ = ["TURN_ID", "TurnHit", "TurnRecord", "TurnStep", "TurnSummary", "agent_of_turn"]

TURN_ID = r"^[a-z][a-z0-9-]{0,63}\.[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}$"


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
    # The hive's own subagents (``mcp__subagent__*``) it started or steered, by their ids.
    hive_subagents: list[str] = Field(default_factory=list)
    next_seq: int | None = None


class TurnHit(_Out):
    """A search match: the turn, the step, and the matched text around the match."""

    turn: TurnSummary
    seq: int
    kind: str
    snippet: str
