"""``meta``: set_status, get_agent_meta; and compact, in no group (``hyperhive`` surface)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from hyperhive.tools.decl import HYPERHIVE_SERVER, NoArgs, Tool, ToolArgs, as_json
from hyperhive.tools.groups import ToolGroup
from hyperhive.wirebase import AgentMeta, CompactQueued, Req, _Out

__all__ = [
    "TOOLS",
    "CompactReq",
    "GetAgentMetaReq",
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


def _meta_shown(meta: AgentMeta) -> AgentMeta | dict[str, Any]:
    """Spec 002: ``matrix_accounts`` is omitted for an agent with no Matrix provisioning."""
    if meta.matrix_accounts is not None:
        return meta
    return meta.model_dump(by_alias=True, exclude={"matrix_accounts"})


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
        "its meta as JSON",
        _ME,
        wire=GetAgentMetaReq,
        render=lambda a, r: as_json(_meta_shown(r)),
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
