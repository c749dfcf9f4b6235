"""An agent's ``agent.toml``: its model, tools, recipients, servers, limits and budget."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import (
    Field,
    PrivateAttr,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from hyperhive.budgets import BudgetLimits
from hyperhive.config.fields import Effort, Strict
from hyperhive.config.mcp import DEFAULT_MCP_SERVERS, MATRIX_MCP_SERVER, McpServer
from hyperhive.matrix.config import AgentMatrixConfig
from hyperhive.permissions import BASH_SERVER, Capability, ToolGroup
from hyperhive.tools.decl import MATRIX_SERVER

__all__ = ["AgentConfig", "ResourceLimits"]


class ResourceLimits(Strict):
    """Per-agent limits, applied through cgroups where the machine allows it."""

    memory_mb: int | None = Field(
        default=None, ge=16, description="Memory limit of the agent's processes, in MiB."
    )
    pids: int | None = Field(default=None, ge=8, description="Most processes the agent may run.")
    cpu_percent: int | None = Field(
        default=None, ge=1, le=100_000, description="CPU share in percent of one core (200: two)."
    )


class AgentConfig(Strict):
    """An agent's ``agent.toml``.

    An unknown name in ``tool_groups`` (a group since renamed or removed) is
    skipped with a warning rather than refused (the seed's ``parse_list``
    rule): one stale name must not cost an agent its whole tool surface. The
    warnings are kept in :attr:`warnings` for the dashboard and ``hivectl``.
    """

    model: str | None = Field(
        default=None,
        description="Model of the agent's turns; unset: hive.toml's `default_model`, else "
        "claude's default.",
    )
    subagent_model: str = Field(default="haiku", description="Model of the agent's subagents.")
    # The hive's choice for subagent work: cheaper than claude's own default (medium in
    # claude 2.1.328, high on most models in earlier releases); claude's --effort levels.
    subagent_effort: Effort = Field(
        default="low",
        description="claude's `--effort` for the agent's subagents: the hive's choice, cheaper "
        "than claude's own default (`medium` in the pinned claude).",
    )
    tool_groups: list[ToolGroup] = Field(
        default_factory=lambda: list(ToolGroup.AGENT_DEFAULT),
        description="The tool groups the agent holds. An unknown name is skipped with a "
        "warning (refused in a config proposed now); never empty.",
    )
    capabilities: list[Capability] = Field(
        default_factory=list, description="Single powers outside the tool groups."
    )
    allowed_recipients: list[str] = Field(
        default_factory=list,
        description="If set, the only agents it may message, besides its parent; empty: the "
        "family rule (itself, its parent, siblings, descendants and the operator).",
    )
    extra_recipients: list[str] = Field(
        default_factory=list, description="Agents it may message besides the family rule's."
    )
    mcp_servers: dict[str, McpServer] = Field(
        default_factory=dict,
        description="Extra MCP servers by name (`[mcp_servers.<name>]`), over the built-in "
        "`bash` and `subagent`.",
    )
    system_prompt: str = Field(default="", description="Appended to the hive's system prompt.")
    limits: ResourceLimits = Field(
        default_factory=ResourceLimits,
        description="Resource limits of its processes, through cgroups where the machine allows.",
    )
    budget: BudgetLimits = Field(
        default_factory=BudgetLimits, description="The agent's spend limits; unset: unlimited."
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Environment variables for its claude runs and tasks."
    )
    matrix: AgentMatrixConfig = Field(
        default_factory=AgentMatrixConfig,
        description="A Matrix identity on the hive's homeserver, its `mcp__matrix__*` tools "
        "and wakes.",
    )
    on_host_loss: Literal["wait", "replace"] = Field(
        default="wait",
        description="When its remote host's lease expires: `wait` for that host (its disk holds "
        "the agent's `state/` and claude session), or `replace` it on another live host, "
        "from its config, its inbox and the snapshot of its `state/` and claude session its "
        "host sent after its last turn (hive.toml's `snapshot_max_bytes`).",
    )
    flush_on_stop: bool = Field(
        default=True,
        description="A graceful stop (kill, restart, update, move, the hive going down) gives "
        "the agent, when idle, one last short turn to save what it needs to its `state/` "
        "notes; the stop's grace bounds it. Skipped for an agent that never had a session "
        "(nothing in context to save). `false`: it stops at once, with no turn.",
    )

    _warnings: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _skip_stale_groups(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        skipped: list[str] = []
        raw = data.get("tool_groups") if isinstance(data, dict) else None
        if isinstance(raw, list):
            known = {g.value for g in ToolGroup}
            names = [g.strip().lower() if isinstance(g, str) else g for g in raw]
            keep = [g for g in names if not isinstance(g, str) or g in known]
            skipped = [g for g in names if isinstance(g, str) and g not in known]
            if skipped and not keep:
                keep = [g.value for g in ToolGroup.AGENT_DEFAULT]
            data = {**data, "tool_groups": keep}
        config = handler(data)
        if skipped and isinstance(config, AgentConfig):
            config._warnings = (
                f"tool_groups: unknown group(s) {', '.join(map(repr, skipped))} skipped "
                f"(known: {', '.join(ToolGroup)})"
                + ("; none left, so the default groups apply" if names == skipped else ""),
            )
        return config

    @property
    def warnings(self) -> tuple[str, ...]:
        """What was wrong but survivable in the file this config came from."""
        return self._warnings

    @field_validator("tool_groups")
    @classmethod
    def _groups_never_empty(cls, v: list[ToolGroup]) -> list[ToolGroup]:
        if not v:
            raise ValueError("tool_groups may not be empty; omit it for the default groups")
        return list(dict.fromkeys(v))

    @field_validator("mcp_servers")
    @classmethod
    def _server_names(cls, v: dict[str, McpServer]) -> dict[str, McpServer]:
        for name in v:
            if not re.fullmatch(r"[a-z0-9_-]{1,40}", name):
                raise ValueError(f"MCP server name {name!r} must be [a-z0-9_-], at most 40")
            if name == "hyperhive":
                raise ValueError("'hyperhive' is the built-in surface and cannot be redefined")
        return v

    @model_validator(mode="after")
    def _matrix_name_free(self) -> AgentConfig:
        if self.matrix.enabled and MATRIX_SERVER in self.mcp_servers:
            raise ValueError(
                "[matrix] enabled = true serves the built-in 'matrix' MCP server; remove "
                "[mcp_servers.matrix] (or leave [matrix] disabled to keep your own)"
            )
        return self

    def servers(self) -> dict[str, McpServer]:
        """Extra MCP servers in effect: defaults, overridden by the file, minus disabled.

        ``[matrix] enabled`` adds the host's own ``matrix`` surface.
        """
        merged = {**DEFAULT_MCP_SERVERS, **self.mcp_servers}
        if self.matrix.enabled:
            merged[MATRIX_SERVER] = MATRIX_MCP_SERVER
        return {name: s for name, s in merged.items() if s.enabled}

    def servers_for(self, groups: Iterable[ToolGroup]) -> dict[str, McpServer]:
        """The extra servers a turn of an agent holding ``groups`` is given.

        ``bash`` only with ``execution``, and a server with a ``tool_group``
        only with that group. Left out rather than left for a gate to refuse:
        tools that can never succeed only cost context and invite failed calls.
        """
        held = set(groups)
        return {
            name: s
            for name, s in self.servers().items()
            if (name != BASH_SERVER or ToolGroup.EXECUTION in held)
            and (s.tool_group is None or s.tool_group in held)
        }
