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

    type: Literal["stdio", "http"] = "stdio"
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    allowed_tools: list[str] = Field(default_factory=lambda: ["*"])
    tool_group: ToolGroup | None = None
    available_to_subagents: bool = False
    enabled: bool = True
    builtin: bool = False

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

    memory_mb: int | None = Field(default=None, ge=16)
    pids: int | None = Field(default=None, ge=8)
    cpu_percent: int | None = Field(default=None, ge=1, le=100_000)


Effort = Literal["low", "medium", "high", "xhigh", "max"]


class AgentConfig(_Strict):
    """An agent's ``agent.toml``.

    An unknown name in ``tool_groups`` (a group since renamed or removed) is
    skipped with a warning rather than refused (the seed's ``parse_list``
    rule): one stale name must not cost an agent its whole tool surface. The
    warnings are kept in :attr:`warnings` for the dashboard and ``hivectl``.
    """

    model: str | None = None
    subagent_model: str = "haiku"
    # The hive's choice for subagent work: cheaper than claude's own default (medium in
    # claude 2.1.328, high on most models in earlier releases); claude's --effort levels.
    subagent_effort: Effort = "low"
    tool_groups: list[ToolGroup] = Field(default_factory=lambda: list(ToolGroup.AGENT_DEFAULT))
    capabilities: list[Capability] = Field(default_factory=list)
    allowed_recipients: list[str] = Field(default_factory=list)
    extra_recipients: list[str] = Field(default_factory=list)
    mcp_servers: dict[str, McpServer] = Field(default_factory=dict)
    system_prompt: str = ""
    limits: ResourceLimits = Field(default_factory=ResourceLimits)
    # [budget]: this agent's spend limits (hyperhive.budgets); unset = unlimited.
    budget: BudgetLimits = Field(default_factory=BudgetLimits)
    env: dict[str, str] = Field(default_factory=dict)
    # [matrix]: a Matrix identity on the hive's homeserver, its mcp__matrix__* tools and wakes.
    matrix: AgentMatrixConfig = Field(default_factory=AgentMatrixConfig)
    # When its remote host's lease expires: "wait" for that host (its disks hold the
    # agent's state/ and claude session), or "replace" it on another live host, fresh
    # from its config and inbox (what is on the lost host's disk stays there).
    on_host_loss: Literal["wait", "replace"] = "wait"

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

    root_agent: str = "queen"
    # The hive's name for its agents (get_agent_meta's hive_name); unset = its hive id.
    name: str | None = Field(default=None, min_length=1, max_length=100)
    runtime: Literal["bwrap", "unsandboxed"] = "bwrap"
    bind: str = "127.0.0.1"
    dashboard_port: int = Field(default=7878, ge=0, le=65535)
    # "token": the operator token is required even on loopback, because every
    # sandbox shares the host's network (agents reach loopback for their MCP
    # surfaces). "loopback" trusts anything that reaches a loopback bind.
    dashboard_auth: Literal["token", "loopback"] = "token"
    # How long the front page's activity log keeps an event (messages are kept apart).
    activity_keep_days: float = Field(default=30.0, gt=0)
    agent_host_port: int = Field(default=0, ge=0, le=65535)
    claude_bin: str | None = None
    default_model: str | None = None
    env_passthrough: list[str] = Field(
        default_factory=lambda: [
            "ANTHROPIC_API_KEY",
            "CLAUDE_CODE_OAUTH_TOKEN",  # a Claude subscription (`claude setup-token`)
            "ANTHROPIC_BASE_URL",
        ]
    )
    max_frame_bytes: int = Field(default=1 << 20, ge=1024)
    max_body_bytes: int = Field(default=64 << 10, ge=64)
    remind_max_pending: int = Field(default=50, ge=1)
    # Ignored: reminders are delivered whole (at most 64 KiB), never spilled to a file;
    # kept so a hive.toml from before still loads.
    reminder_spill_bytes: int | None = Field(default=None, ge=64)
    compact_watermark: float = Field(default=0.75, gt=0, lt=1)
    # After a wake, how long a harness waits for more news before its turn (so news
    # landing a moment apart is one turn's). 0, the default: the turn-economy table
    # shows no turn it saves, since news that belongs together wakes once.
    settle_seconds: float = Field(default=0.0, ge=0, le=10)
    context_window: int = Field(default=200_000, ge=1000)
    # How many claude processes the agent host runs at once (turns, compactions,
    # subagents); unset = from the machine (hyperhive.agent.admission.default_slots).
    claude_slots: int | None = Field(default=None, ge=1)
    # The most agents placement assigns to this agent host (None: no cap; its claude
    # slots still weigh how many it gets).
    max_agents: int | None = Field(default=None, ge=0)
    # [forge]: the Forgejo/Gitea agents with the forge group work on (none: no forge).
    forge: ForgeConfig | None = None
    # [hostlink]: where agent hosts on other machines dial in (none: local hosts only).
    hostlink: HostLinkConfig | None = None
    # [matrix]: the homeserver agents with [matrix] enabled get accounts on (none: no Matrix).
    matrix: MatrixConfig | None = None
    # Where the hive's state lives: unset = SQLite at <home>/hive.db; a
    # postgresql:// URL for a hive that outgrows one machine. HIVE_STORE_URL wins.
    store: str | None = None
    # A file (mode 0600, the coordinator's own) holding the store URL, so its
    # password is in no file an agent user could read; relative to the hive home.
    store_url_file: Path | None = None
    # [budget]: the whole hive's spend limits and the operator's time zone.
    budget: HiveBudget = Field(default_factory=HiveBudget)
    # [telemetry]: where traces are exported (OTLP/HTTP); unset = no traces at all.
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)

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
    url = source.get(STORE_URL_ENV)
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
