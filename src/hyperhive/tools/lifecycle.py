"""``lifecycle``: spawning, stopping and rebuilding descendants (``hyperhive`` surface)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from hyperhive.tools.decl import HYPERHIVE_SERVER, Tool, ToolArgs, as_json
from hyperhive.tools.groups import ToolGroup
from hyperhive.wirebase import ApprovalRequested, LifecycleResult, Req

__all__ = [
    "AGENT_TOML_KEYS",
    "TOOLS",
    "AgentArgs",
    "InitConfigArgs",
    "LifecycleReq",
    "RequestInitConfigReq",
]

AGENT_TOML_KEYS = (
    "Every key is optional; the hive-children skill lists them with their defaults. "
    'Example: \'model = "sonnet"\\nsystem_prompt = "You keep the docs current."\'.'
)


class InitConfigArgs(ToolArgs):
    name: str = Field(description="The child's name: new, or your existing direct child.")
    config: str = Field(
        default="", description="Its agent.toml text; '' = defaults. " + AGENT_TOML_KEYS
    )


class RequestInitConfigReq(InitConfigArgs, Req[ApprovalRequested]):
    """Spawn (or re-init) a direct child: ``config`` is the child's agent.toml text."""

    cmd: Literal["request_init_config"]


class AgentArgs(ToolArgs):
    agent: str = Field(description="A descendant of yours.")


class LifecycleReq(AgentArgs, Req[LifecycleResult]):
    """``kill``/``start``/``restart``/``update``/``destroy`` of a descendant."""

    cmd: Literal["kill", "start", "restart", "update", "destroy"]


_L = ToolGroup.LIFECYCLE

_VERBS = (
    ("kill", "Stop a descendant; it stays stopped (mail queues) until start."),
    ("start", "Start a stopped descendant."),
    ("restart", "Restart a descendant; its unacked mail is redelivered."),
    ("update", "Rebuild a descendant from its applied config."),
    ("destroy", "Remove a descendant for good (never yourself or an ancestor)."),
)

TOOLS: tuple[Tool[Any, Any], ...] = (
    Tool(
        HYPERHIVE_SERVER,
        "request_init_config",
        "Ask to spawn a child under you (or re-init your direct child) with this agent.toml; "
        "approval_resolved arrives in your inbox once the operator decides. A new child "
        "starts idle: send it its task.",
        InitConfigArgs,
        "approval #id pending",
        _L,
        wire=RequestInitConfigReq,
        render=lambda a, r: (
            f"approval #{r.approval_id} pending: the operator decides; "
            "approval_resolved arrives in your inbox"
        ),
    ),
    *(
        Tool(
            HYPERHIVE_SERVER,
            verb,
            text,
            AgentArgs,
            "the agent's new state as JSON",
            _L,
            wire=LifecycleReq,
            render=lambda a, r: as_json(r),
        )
        for verb, text in _VERBS
    ),
)
