"""The hive's ``hive.toml`` (inside the home): every key optional."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from hyperhive.budgets import HiveBudget
from hyperhive.config.fields import Port, Strict
from hyperhive.errors import InvalidName
from hyperhive.forge.config import ForgeConfig
from hyperhive.matrix.config import MatrixConfig
from hyperhive.names import validate_agent_name
from hyperhive.netlink.config import HostLinkConfig
from hyperhive.telemetry.config import TelemetryConfig

__all__ = ["HiveConfig"]


class HiveConfig(Strict):
    """The hive's ``hive.toml`` (inside the home); every key optional."""

    root_agent: str = Field(
        default="queen", description="The root manager agent `hivectl up` makes sure exists."
    )
    name: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="The hive's name, as agents read it in `get_agent_meta`'s `hive_name`; "
        "unset: the hive id.",
    )
    runtime: Literal["bwrap", "unsandboxed"] = Field(
        default="bwrap",
        description="`bwrap`: every agent process under bubblewrap as its own system user; "
        "`unsandboxed`: plain subprocesses, logged loudly (agents are not kept apart).",
    )
    bind: str = Field(
        default="127.0.0.1",
        description="Address the dashboard (and the agent host's HTTP server) bind to.",
    )
    dashboard_port: Port = Field(
        default=7878,
        description="The dashboard's port; if taken, a free one is used and `hivectl up` says "
        "so; 0 always picks a free one.",
    )
    # Every sandbox shares the host's network (agents reach loopback for their MCP
    # surfaces), so by default reaching loopback proves nothing.
    dashboard_auth: Literal["token", "loopback"] = Field(
        default="token",
        description="`token`: the operator token is required, on loopback too; `loopback`: no "
        "token on a loopback bind (only if agents cannot reach the host's loopback).",
    )
    activity_keep_days: float = Field(
        default=30.0,
        gt=0,
        description="How many days the front page's activity log keeps an event (messages "
        "are not pruned).",
    )
    agent_host_port: Port = Field(
        default=0,
        description="The agent host's HTTP port for the agents' MCP surfaces; 0: a free one.",
    )
    claude_bin: str | None = Field(
        default=None,
        description="The Claude Code CLI agents run (a path, or a name looked up on PATH); "
        "unset: `<home>/claude` (`hivectl install-claude`), else a checkout's "
        "`node_modules/.bin/claude`, else `claude` on PATH. `up` refuses one the agents' "
        "users cannot run.",
    )
    default_model: str | None = Field(
        default=None,
        description="Model of turns whose `agent.toml` sets none; unset: claude's default.",
    )
    env_passthrough: list[str] = Field(
        default_factory=lambda: [
            "ANTHROPIC_API_KEY",
            "CLAUDE_CODE_OAUTH_TOKEN",  # a Claude subscription (`claude setup-token`)
            "ANTHROPIC_BASE_URL",
        ],
        description="Variables passed from the agent host's environment (`hivectl up`'s) to "
        "every claude.",
    )
    max_frame_bytes: int = Field(
        default=1 << 20, ge=1024, description="Largest JSON-lines frame on a socket."
    )
    max_body_bytes: int = Field(
        default=64 << 10, ge=64, description="Largest message body (and operator answer)."
    )
    remind_max_pending: int = Field(
        default=50,
        ge=1,
        description="Pending reminders per agent (`HIVE_REMIND_MAX_PENDING_PER_AGENT` overrides).",
    )
    # Kept so a hive.toml from before reminders were delivered whole still loads.
    reminder_spill_bytes: int | None = Field(
        default=None,
        ge=64,
        description="Ignored: a reminder (at most 64 KiB) is delivered whole in its message; "
        "accepted so an older hive.toml still loads.",
    )
    compact_watermark: float = Field(
        default=0.75,
        gt=0,
        lt=1,
        description="Context usage (a fraction of `context_window`) above which an agent "
        "checkpoints its notes and compacts.",
    )
    snapshot_max_bytes: int = Field(
        default=64 << 20,
        ge=0,
        description="Largest agent snapshot (its `state/` and claude session, uncompressed) a "
        'host sends to the store after each turn, for `on_host_loss = "replace"`; a larger '
        "one is refused (logged, an event) and the previous snapshot kept. 0: no snapshots.",
    )
    midturn_mail: bool = Field(
        default=True,
        description="Offer mail that arrives while an agent's turn runs to that running turn "
        "(claude's streaming input), acked with the turn once the model saw it (claude echoed "
        "it and a model answer followed). Off: it wakes the next turn instead.",
    )
    settle_seconds: float = Field(
        default=0.0,
        ge=0,
        le=10,
        description="After a wake, how long an agent waits for more news before its turn (so "
        "news landing a moment apart is one turn's). 0: news that belongs together wakes once "
        "by design, and the turn-economy table shows no turn a window saves.",
    )
    turns_keep_days: float = Field(
        default=30.0,
        gt=0,
        description="How many days an agent host keeps each agent's turn records "
        "(`hivectl turns`); older ones are pruned after a turn.",
    )
    turns_keep_mb: float = Field(
        default=256.0,
        gt=0,
        description="The most MiB of turn records an agent host keeps per agent; past it the "
        "oldest are pruned after a turn.",
    )
    context_window: int = Field(
        default=200_000,
        ge=1000,
        description="Tokens in the model's context window (for the usage figures).",
    )
    claude_slots: int | None = Field(
        default=None,
        ge=1,
        description="How many claude processes the agent host runs at once (turns, "
        "compactions, subagents); the rest wait in a fair queue, shown as `waiting_slot`. "
        "Unset: min(available memory / 275 MB, 4 × cores), at least 1.",
    )
    max_agents: int | None = Field(
        default=None,
        ge=0,
        description="On an agent host: the most agents placement assigns to it (its "
        "`claude_slots` weigh how many it gets below that); unset: no cap.",
    )
    forge: ForgeConfig | None = Field(
        default=None,
        description="The Forgejo/Gitea agents with the `forge` group work on; unset: no forge.",
    )
    hostlink: HostLinkConfig | None = Field(
        default=None,
        description="Where agent hosts on other machines dial in; unset: local hosts only.",
    )
    matrix: MatrixConfig | None = Field(
        default=None,
        description="The homeserver agents with `[matrix] enabled` get accounts on; unset: "
        "no Matrix.",
    )
    store: str | None = Field(
        default=None,
        description="A `postgresql://user@host/db` URL for the hive's state (`HIVE_STORE_URL` "
        "wins); refused if it carries a password and hive.toml is readable by others. Unset: "
        "SQLite at `<home>/hive.db`.",
    )
    store_url_file: Path | None = Field(
        default=None,
        description="A file (mode 0600, the coordinator's own; relative to the home) holding "
        "the store URL, so its password is in no file an agent can read.",
    )
    budget: HiveBudget = Field(
        default_factory=HiveBudget,
        description="The whole hive's spend limits (the sum over all agents) and the "
        "operator's time zone.",
    )
    telemetry: TelemetryConfig = Field(
        default_factory=TelemetryConfig,
        description="Where traces are exported (OTLP/HTTP); unset: no traces at all.",
    )

    @field_validator("store")
    @classmethod
    def _store_url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"postgres(ql)?://", v):
            raise ValueError(
                "store must be a postgresql://user@host/dbname URL "
                "(leave it out for SQLite in the hive home)"
            )
        return v or None

    @field_validator("root_agent")
    @classmethod
    def _root_name(cls, v: str) -> str:
        try:
            return validate_agent_name(v)
        except InvalidName as exc:
            raise ValueError(exc.message) from exc
