"""Configuration: an agent's ``agent.toml``, the hive's ``hive.toml``, and paths.

Both files are validated with pydantic; a bad file raises ``ConfigError``
naming the file, the line and what is wrong. The hive's home is ``--home``,
else ``HIVE_HOME``, else ``~/.local/share/hyperhive``.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import tomli_w
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from hyperhive.budgets import BudgetLimits, HiveBudget
from hyperhive.errors import ConfigError, InvalidName
from hyperhive.forge.config import ForgeConfig
from hyperhive.matrix.config import AgentMatrixConfig, MatrixConfig
from hyperhive.names import validate_agent_name
from hyperhive.netlink.config import HostLinkConfig
from hyperhive.permissions import BASH_SERVER, SUBAGENT_SERVER, Capability, ToolGroup
from hyperhive.store.url import has_password, read_url_file
from hyperhive.telemetry.config import TelemetryConfig
from hyperhive.tools.decl import MATRIX_SERVER

__all__ = [
    "DEFAULT_MCP_SERVERS",
    "HOME_ENV",
    "MATRIX_SERVER",
    "STORE_URL_ENV",
    "SUBAGENT_SERVER",
    "AgentConfig",
    "Effort",
    "HiveConfig",
    "HivePaths",
    "McpServer",
    "ResourceLimits",
    "allowed_by_server",
    "dump_agent_config",
    "load_agent_config",
    "load_hive_config",
    "parse_agent_config",
    "resolve_home",
]

HOME_ENV = "HIVE_HOME"
STORE_URL_ENV = "HIVE_STORE_URL"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class McpServer(_Strict):
    """An MCP server entry in an agent's config (``[mcp_servers.<name>]``).

    ``builtin`` entries (the default ``bash`` and ``subagent``) are served by
    the agent host itself; their URL is filled in per agent at launch time.
    ``allowed_tools`` defaults to every tool of the server (``["*"]``): a turn
    runs under ``--print``, where a tool missing from ``--allowedTools`` is
    refused, so a declared server whose tools were not allowed would be dead
    weight. ``tool_group`` offers the server only to agents holding that group.
    """

    type: Literal["stdio", "http"] = Field(
        default="stdio",
        description="`stdio`: a command claude starts; `http`: a server claude reaches at `url`.",
    )
    command: str | None = Field(default=None, description="The command of a `stdio` server.")
    args: list[str] = Field(default_factory=list, description="Its arguments.")
    env: dict[str, str] = Field(default_factory=dict, description="Its environment variables.")
    url: str | None = Field(default=None, description="The http(s) URL of an `http` server.")
    headers: dict[str, str] = Field(
        default_factory=dict, description="HTTP headers sent to an `http` server."
    )
    allowed_tools: list[str] = Field(
        default_factory=lambda: ["*"],
        description="The server's tools claude may call (`*`: all). Under `--print` claude "
        "refuses a tool that is not allowed, so list names only to narrow it.",
    )
    tool_group: ToolGroup | None = Field(
        default=None,
        description="Offer the server only to agents holding this tool group; unset: to all.",
    )
    available_to_subagents: bool = Field(
        default=False, description="Share the server with the agent's subagents too."
    )
    enabled: bool = Field(
        default=True, description="`false` removes a server, the built-in `bash` or `subagent` too."
    )
    builtin: bool = Field(
        default=False,
        description="Served by the agent host itself (the defaults `bash` and `subagent`); "
        "its URL is filled in per agent.",
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"https?://", v):
            raise ValueError("url must start with http:// or https://")
        return v


# Present unless the agent's file overrides or disables them (the spec's
# lib.mkDefault). bash's tools are granted by the execution group, not by "*".
DEFAULT_MCP_SERVERS: dict[str, McpServer] = {
    BASH_SERVER: McpServer(type="http", builtin=True, allowed_tools=[]),
    SUBAGENT_SERVER: McpServer(type="http", builtin=True, allowed_tools=["*"]),
}


# Offered only to an agent whose agent.toml enables [matrix]; every tool of it allowed.
MATRIX_MCP_SERVER = McpServer(type="http", builtin=True, allowed_tools=["*"])


def allowed_by_server(servers: Mapping[str, McpServer]) -> dict[str, list[str]]:
    """``{server: allowed_tools}`` for :func:`~hyperhive.permissions.allowed_tools_arg`."""
    return {name: list(s.allowed_tools) for name, s in servers.items() if s.allowed_tools}


class ResourceLimits(_Strict):
    """Per-agent limits, applied through cgroups where the machine allows it."""

    memory_mb: int | None = Field(
        default=None, ge=16, description="Memory limit of the agent's processes, in MiB."
    )
    pids: int | None = Field(default=None, ge=8, description="Most processes the agent may run.")
    cpu_percent: int | None = Field(
        default=None, ge=1, le=100_000, description="CPU share in percent of one core (200: two)."
    )


Effort = Literal["low", "medium", "high", "xhigh", "max"]


class AgentConfig(_Strict):
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


def _loc_line(text: str, loc: tuple[int | str, ...]) -> int | None:
    """Best-effort line of the key a validation error points at."""
    keys = [k for k in loc if isinstance(k, str)]
    lines = text.splitlines()
    for key in reversed(keys):
        pattern = re.compile(rf"^\s*(\[+\s*)?([\w.-]+\.)?{re.escape(key)}\s*(=|\]|\.)")
        for i, line in enumerate(lines, start=1):
            if pattern.search(line):
                return i
    return None


_M = TypeVar("_M", bound=BaseModel)


def _parse_toml(model: type[_M], text: str, path: str) -> _M:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        line = int(match.group(1)) if match else max(1, len(text.splitlines()))
        raise ConfigError(f"not valid TOML: {exc}", path=path, line=line) from exc
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        problem = first["msg"]
        if first["type"] == "extra_forbidden":
            problem = "unknown setting (check the spelling)"
        count = len(exc.errors())
        more = f" (and {count - 1} more problem(s))" if count > 1 else ""
        raise ConfigError(
            f"{where}: {problem}{more}", path=path, line=_loc_line(text, tuple(first["loc"]))
        ) from exc


def parse_agent_config(text: str, path: str = "agent.toml", *, strict: bool = False) -> AgentConfig:
    """Parse an ``agent.toml`` text; ``ConfigError`` names file and line.

    ``strict`` refuses what would otherwise be skipped with a warning (a stale
    tool-group name): right for a config being proposed now, whose author
    can fix it, unlike an applied one that must keep its agent running.
    """
    config = _parse_toml(AgentConfig, text, path)
    if strict and config.warnings:
        line = _loc_line(text, ("tool_groups",))
        raise ConfigError("; ".join(config.warnings), path=path, line=line)
    return config


def load_agent_config(path: Path) -> AgentConfig:
    """Read and parse an ``agent.toml``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", path=str(path)) from exc
    return parse_agent_config(text, str(path))


def dump_agent_config(config: AgentConfig) -> str:
    """Render a config back to TOML (defaults left out, so files stay short)."""
    data: dict[str, Any] = config.model_dump(mode="json", exclude_defaults=True)
    return tomli_w.dumps(data)


class HiveConfig(_Strict):
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
    dashboard_port: int = Field(
        default=7878,
        ge=0,
        le=65535,
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
    agent_host_port: int = Field(
        default=0,
        ge=0,
        le=65535,
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


def load_hive_config(home: Path, env: Mapping[str, str] | None = None) -> HiveConfig:
    """Read ``<home>/hive.toml`` (absent = defaults), then environment overrides."""
    source = os.environ if env is None else env
    path = home / "hive.toml"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", path=str(path)) from exc
    config = _parse_toml(HiveConfig, text, str(path))
    override = source.get("HIVE_REMIND_MAX_PENDING_PER_AGENT")
    if override:
        try:
            config = config.model_copy(update={"remind_max_pending": max(1, int(override))})
        except ValueError as exc:
            raise ConfigError(
                f"HIVE_REMIND_MAX_PENDING_PER_AGENT={override!r} is not a whole number"
            ) from exc
    if config.store and has_password(config.store) and _readable_by_others(path):
        raise ConfigError(
            "`store` carries the database password but hive.toml is readable by other "
            "users (agents run as other users): move the URL into a store_url_file "
            "(mode 0600), or chmod 600 hive.toml",
            path=str(path),
        )
    if config.store and config.store_url_file is not None:
        raise ConfigError("set `store` or `store_url_file`, not both", path=str(path))
    # A Secret made from a file keeps its trailing newline in the environment.
    url = (source.get(STORE_URL_ENV) or "").strip()
    where = STORE_URL_ENV
    if not url and config.store_url_file is not None:
        url_file = home / config.store_url_file
        url = read_url_file(url_file)
        where = str(url_file)
    if url:
        try:
            config = HiveConfig.model_validate({**config.model_dump(), "store": url})
        except ValidationError as exc:
            raise ConfigError(f"{where}: {exc.errors()[0]['msg']}") from exc
    return config


def _readable_by_others(path: Path) -> bool:
    try:
        return bool(path.stat().st_mode & 0o077)
    except OSError:
        return False


SYSTEM_HOME = Path("/var/lib/hyperhive")


def resolve_home(
    explicit: str | os.PathLike[str] | None = None, *, euid: int | None = None
) -> Path:
    """``--home``, else ``$HIVE_HOME``, else ``~/.local/share/hyperhive``.

    As root the default is ``/var/lib/hyperhive``: root's home is mode 0700,
    so sandboxed agent users could never reach a hive kept under it.
    """
    if explicit:
        return Path(explicit).expanduser().resolve()
    env = os.environ.get(HOME_ENV)
    if env:
        return Path(env).expanduser().resolve()
    if (os.geteuid() if euid is None else euid) == 0:
        return SYSTEM_HOME
    return (Path.home() / ".local" / "share" / "hyperhive").resolve()


@dataclass(frozen=True, slots=True)
class HivePaths:
    """Where everything of one hive lives under its home.

    ``run_dir`` moves the runtime dir (sockets, per-agent runtime files) off the
    home: a remote agent host serves its agents' sockets in a run dir of its
    own, never beside the coordinator's.
    """

    home: Path
    run_dir: Path | None = None

    @property
    def db(self) -> Path:
        return self.home / "hive.db"

    @property
    def meta(self) -> Path:
        return self.home / "meta"

    @property
    def topology(self) -> Path:
        return self.meta / "topology.json"

    @property
    def run(self) -> Path:
        return self.run_dir if self.run_dir is not None else self.home / "run"

    @property
    def host_sock(self) -> Path:
        return self.run / "host.sock"

    @property
    def hosts_sock(self) -> Path:
        return self.run / "hosts.sock"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    def agent_sock(self, name: str) -> Path:
        return self.run / "agents" / f"{name}.sock"

    def agent_dir(self, name: str) -> Path:
        return self.home / "agents" / name

    def agent_config_repo(self, name: str) -> Path:
        return self.agent_dir(name) / "config"

    def agent_state(self, name: str) -> Path:
        return self.agent_dir(name) / "state"

    def agent_home(self, name: str) -> Path:
        return self.agent_dir(name) / "home"

    def agent_work(self, name: str) -> Path:
        return self.agent_dir(name) / "work"

    def agent_runtime(self, name: str) -> Path:
        return self.run / "agent-runtime" / name

    def applied_config(self, name: str) -> Path:
        return self.meta / "agents" / f"{name}.toml"
