"""``diagnostics``: get_logs, get_turns; and get_host_journal, behind a capability
(``hyperhive`` surface)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from hyperhive.tools.decl import HYPERHIVE_SERVER, Tool, ToolArgs
from hyperhive.tools.groups import Capability, ToolGroup
from hyperhive.turnview import TurnHit, TurnRecord, TurnSummary
from hyperhive.wirebase import LogTail, Req, _Out

__all__ = [
    "TOOLS",
    "GetHostJournalReq",
    "GetLogsReq",
    "GetTurnsReq",
    "HostJournal",
    "LinesArgs",
    "LogsArgs",
    "TurnsArgs",
    "TurnsView",
]


class LogsArgs(ToolArgs):
    agent: str = Field(description="A descendant of yours.")
    lines: int = Field(default=100, ge=1, le=5000, description="How many of the last lines.")


class GetLogsReq(LogsArgs, Req[LogTail]):
    cmd: Literal["get_logs"]


class LinesArgs(ToolArgs):
    lines: int = Field(default=100, ge=1, le=5000, description="How many of the last lines.")


class HostJournal(_Out):
    """The coordinator's and agent host's own log tails."""

    coordinator: list[str]
    host: list[str]


class GetHostJournalReq(LinesArgs, Req[HostJournal]):
    cmd: Literal["get_host_journal"]


class TurnsArgs(ToolArgs):
    agent: str | None = Field(default=None, description="You (default) or a descendant.")
    turn: str | None = Field(
        default=None, max_length=100, description="A turn id: that turn whole."
    )
    search: str | None = Field(
        default=None, min_length=1, max_length=500, description="A phrase to find in its turns."
    )
    limit: int = Field(default=20, ge=1, le=200, description="How many turns to list.")


class TurnsView(_Out):
    """``get_turns``' answer: a list, a search's hits, or one turn whole."""

    turns: list[TurnSummary] = Field(default_factory=list)
    hits: list[TurnHit] = Field(default_factory=list)
    record: TurnRecord | None = None


class GetTurnsReq(TurnsArgs, Req[TurnsView]):
    cmd: Literal["get_turns"]


def _turn_line(t: TurnSummary) -> str:
    cost = f"${t.cost_usd:.4f}" if t.cost_usd is not None else "-"
    tools = ",".join(t.tools) or "-"
    return f"{t.id} {t.outcome or 'running'} {cost} woke for: {t.wake_reason} tools: {tools}"


def _turns(a: TurnsArgs, r: TurnsView) -> str:
    if r.record is not None:
        steps = [
            f"#{s.seq} {s.kind}{' ' + s.name if s.name else ''}: {s.text}" for s in r.record.steps
        ]
        more = f"\n(more steps after #{r.record.next_seq})" if r.record.next_seq is not None else ""
        return "\n".join([_turn_line(r.record.turn), *steps]) + more
    if a.search is not None:
        return "\n".join(f"{_turn_line(h.turn)}\n  #{h.seq}: {h.snippet}" for h in r.hits) or (
            "(no turn matches)"
        )
    return "\n".join(_turn_line(t) for t in r.turns) or "(no turns recorded)"


def _journal(a: LinesArgs, r: HostJournal) -> str:
    journal = {"coordinator": r.coordinator, "host": r.host}
    return "\n".join(f"== {name}\n" + "\n".join(lines) for name, lines in journal.items())


TOOLS: tuple[Tool[Any, Any], ...] = (
    Tool(
        HYPERHIVE_SERVER,
        "get_logs",
        "The last lines of a descendant's log.",
        LogsArgs,
        "the log lines; or: (no log lines for <agent> yet)",
        ToolGroup.DIAGNOSTICS,
        wire=GetLogsReq,
        render=lambda a, r: "\n".join(r.lines) or f"(no log lines for {a.agent} yet)",
    ),
    Tool(
        HYPERHIVE_SERVER,
        "get_turns",
        "Your or a descendant's recorded turns: a list, a search, or one turn's steps.",
        TurnsArgs,
        "one line per turn (id, outcome, cost, wake, tools); or the hits; or the turn's steps",
        ToolGroup.DIAGNOSTICS,
        wire=GetTurnsReq,
        render=_turns,
    ),
    Tool(
        HYPERHIVE_SERVER,
        "get_host_journal",
        "The last lines of the coordinator's and the agent host's logs.",
        LinesArgs,
        "== coordinator, its lines, then == host, its lines",
        capability=Capability.READ_HOST_JOURNAL,
        wire=GetHostJournalReq,
        render=_journal,
    ),
)
