"""``meta``: set_status, get_agent_meta; compact, in no group; get_deployed, behind the
``meta_read`` capability (``hyperhive`` surface)."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import Field

from hyperhive.tools.decl import HYPERHIVE_SERVER, NoArgs, Tool, ToolArgs, as_json
from hyperhive.tools.groups import Capability, ToolGroup
from hyperhive.wirebase import AgentMeta, CompactQueued, Req, _Out

__all__ = [
    "TOOLS",
    "CompactReq",
    "DeployLogEntry",
    "Deployed",
    "DeployedArgs",
    "GetAgentMetaReq",
    "GetDeployedReq",
    "MetaArgs",
    "SetStatusReq",
    "StatusArgs",
    "StatusSet",
]


class StatusArgs(ToolArgs):
    text: str = Field(description='At most 200 characters; "" clears it.')


class StatusSet(_Out):
    status_text: str


class SetStatusReq(StatusArgs, Req[StatusSet]):
    cmd: Literal["set_status"]


class MetaArgs(ToolArgs):
    name: str | None = Field(default=None, description="Omit for yourself.")


class GetAgentMetaReq(MetaArgs, Req[AgentMeta]):
    cmd: Literal["get_agent_meta"]


class CompactReq(NoArgs, Req[CompactQueued]):
    cmd: Literal["compact"]


class DeployedArgs(ToolArgs):
    agent: str = Field(description="A descendant of yours.")
    entries: int = Field(
        default=10, ge=1, le=200, description="How many log entries, newest first."
    )


class DeployLogEntry(_Out):
    """One entry of the hive's deploy log (the ``meta/`` repo's history) about an agent."""

    seq: int
    at: float
    action: str  # apply, import (adopted), remove, …
    message: str  # e.g. "apply beta 0123456789ab (requested by alpha)"


class Deployed(_Out):
    """What is deployed for an agent: its applied ``agent.toml`` and the log of it."""

    agent: str
    config: str  # the applied TOML text ("" = every default)
    broken: str | None = None  # why the applied text does not parse (it is not running)
    log: list[DeployLogEntry]


class GetDeployedReq(DeployedArgs, Req[Deployed]):
    cmd: Literal["get_deployed"]


def _deployed(a: DeployedArgs, r: Deployed) -> str:
    head = f"== {r.agent}'s applied agent.toml"
    if r.broken is not None:
        head += f" (broken: {r.broken})"
    entries = [
        f"#{e.seq} {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(e.at))} {e.action}: {e.message}"
        for e in r.log
    ]
    return "\n".join(
        [
            head,
            r.config.rstrip("\n") or "(empty: every default)",
            "== its deploy log, newest first",
            *(entries or ["(no entries)"]),
        ]
    )


def _meta_shown(meta: AgentMeta) -> AgentMeta | dict[str, Any]:
    """Spec 002: ``matrix_accounts`` is omitted for an agent with no Matrix provisioning;
    ``applied_config`` for another agent than the caller (its host names only its own)."""
    omit = {
        key
        for key, value in (
            ("matrix_accounts", meta.matrix_accounts),
            ("applied_config", meta.applied_config),
        )
        if value is None
    }
    if not omit:
        return meta
    return meta.model_dump(by_alias=True, exclude=omit)


def _compacting(a: NoArgs, r: CompactQueued) -> str:
    return (
        f"compaction queued (last turn used {r.context_usage:.0%} of the context); "
        "it runs after this turn ends, after a notes checkpoint"
    )


_ME = ToolGroup.META

TOOLS: tuple[Tool[Any, Any], ...] = (
    Tool(
        HYPERHIVE_SERVER,
        "set_status",
        "Your one-line status on the dashboard: set it when you start or finish work.",
        StatusArgs,
        "status: <text>; or: status cleared",
        _ME,
        wire=SetStatusReq,
        render=lambda a, r: f"status: {r.status_text}" if r.status_text else "status cleared",
    ),
    Tool(
        HYPERHIVE_SERVER,
        "get_agent_meta",
        "An agent's parent, running state, status and hive name.",
        MetaArgs,
        "its meta as JSON; your own also names `applied_config`: the file (read-only in "
        "your sandbox) holding your agent.toml as applied",
        _ME,
        wire=GetAgentMetaReq,
        render=lambda a, r: as_json(_meta_shown(r)),
    ),
    Tool(
        HYPERHIVE_SERVER,
        "get_deployed",
        "A descendant's applied agent.toml and its deploy log: what was approved, when, "
        "at whose request.",
        DeployedArgs,
        "== its applied agent.toml, then == its deploy log (#seq time action: message)",
        capability=Capability.META_READ,
        wire=GetDeployedReq,
        render=_deployed,
    ),
    # In no group: an agent can always ask for its own context to be compacted.
    Tool(
        HYPERHIVE_SERVER,
        "compact",
        "Compact your context after this turn, once above 66% (refused below); a notes "
        "checkpoint runs first.",
        NoArgs,
        "compaction queued (with the last turn's context use)",
        wire=CompactReq,
        render=_compacting,
    ),
)
