"""``diagnostics``: get_logs; and get_host_journal, behind a capability (``hyperhive`` surface)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from hyperhive.tools.decl import HYPERHIVE_SERVER, Tool, ToolArgs
from hyperhive.tools.groups import Capability, ToolGroup
from hyperhive.wirebase import LogTail, Req, _Out

__all__ = ["TOOLS", "GetHostJournalReq", "GetLogsReq", "HostJournal", "LinesArgs", "LogsArgs"]


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
        "get_host_journal",
        "The last lines of the coordinator's and the agent host's logs.",
        LinesArgs,
        "== coordinator, its lines, then == host, its lines",
        capability=Capability.READ_HOST_JOURNAL,
        wire=GetHostJournalReq,
        render=_journal,
    ),
)
