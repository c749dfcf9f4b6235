"""What a ``claude`` process needs: argv, MCP config and environment.

Pure module: no I/O. The harness (one turn of an agent) and the subagent
surface (a bounded task for it) both spawn the real claude CLI; everything
that decides *what* that claude may do is computed here, from the agent's
resolved tool groups, so the two cannot drift. Writing the files, spawning
and sandboxing are the callers' business.

Facts about claude 2.1.328 these functions rely on (measured against the
scripted model server in ``tests/support``):

- The prompt goes on **stdin** (write it, close stdin). ``--print`` reads it
  from there; an argv prompt fails past 128 KiB (``E2BIG``) and one starting
  with ``-`` would be read as a flag. The argv therefore has no positional,
  which also keeps the variadic flags (``--tools``, ``--allowedTools``,
  ``--mcp-config``) from swallowing one.
- ``--tools`` decides exactly which built-ins the model is offered, under
  ``--dangerously-skip-permissions`` too; ``--tools ""`` means none in this
  release (we still never emit it, see :func:`builtin_tools_arg`). With tool
  search on, claude also sends a ``DeferredToolPlaceholder`` stub tool and may
  defer MCP tools; ``ENABLE_TOOL_SEARCH=false`` (in :data:`QUIET_ENV`) turns
  that off, so the model sees every granted tool directly.
- ``--mcp-config`` takes ``{"mcpServers": {name: entry}}`` with entries
  ``{"type": "http", "url", "headers"}`` or
  ``{"type": "stdio", "command", "args", "env"}``.
- As uid 0 claude refuses ``--dangerously-skip-permissions`` unless
  ``IS_SANDBOX=1`` (see :func:`claude_env`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hyperhive.config import SUBAGENT_SERVER, AgentConfig, Effort, McpServer
from hyperhive.effective import turn_servers, turn_tool_args
from hyperhive.errors import ConfigError
from hyperhive.permissions import (
    BASH_SERVER,
    HYPERHIVE_SERVER,
    SUBAGENT_CONTROL_SERVER,
    Capability,
    ToolGroup,
    builtin_tools_arg,
)

__all__ = [
    "DEFAULT_PATH",
    "QUIET_ENV",
    "SUBAGENT_CONTROL_SERVER",
    "LaunchSpec",
    "SubagentSpec",
    "agent_mcp_url",
    "claude_env",
    "harness_argv",
    "harness_servers",
    "mcp_config",
    "subagent_argv",
    "subagent_effort",
    "subagent_mcp_config",
    "subagent_model",
    "subagent_servers",
]

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"

# Every claude we start runs offline-capable, quiet and without background
# chatter: no update checks, no telemetry or error reports, no pre-warm
# request (the umbrella switch also covers feature-flag fetches), no tool
# search so every granted tool is offered to the model directly, and no
# bundled skills.
QUIET_ENV: Mapping[str, str] = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "ENABLE_TOOL_SEARCH": "false",
    # claude's bundled skills (charts, its own settings, …) cost ~6 KB of listing
    # in every request and serve no hive agent; the hive ships its own instead.
    "CLAUDE_CODE_DISABLE_BUNDLED_SKILLS": "1",
}

# Surfaces a subagent never reaches, whatever the agent's config says.
_NEVER_FOR_SUBAGENTS = frozenset(
    {HYPERHIVE_SERVER, BASH_SERVER, SUBAGENT_SERVER, SUBAGENT_CONTROL_SERVER}
)

_STREAM_FLAGS = ("--print", "--output-format", "stream-json", "--verbose")


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """Everything one harness turn's claude is built from.

    ``groups`` and ``capabilities`` are the agent's resolved ones (resolved
    once per agent, shared with its MCP surfaces). ``base_url`` is the agent
    host's HTTP server; ``token`` the agent's bearer token. ``model`` overrides
    ``config.model``; neither set means claude's own default.
    """

    agent: str
    claude_bin: str
    groups: tuple[ToolGroup, ...]
    capabilities: tuple[Capability, ...]
    config: AgentConfig
    base_url: str
    token: str
    mcp_config_file: Path
    system_prompt_file: Path
    session_id: str | None = None
    model: str | None = None


@dataclass(frozen=True, slots=True)
class SubagentSpec:
    """Everything a subagent's claude is built from.

    ``groups`` are the *parent agent's* resolved groups, so the subagent's
    built-ins are its parent's. ``control_url`` is the subagent's
    ``subagent_control`` surface (``goal_reached``/``need_help``); ``token``,
    when set, is sent to it as a bearer token. ``model`` and ``effort``
    override the config's ``subagent_model`` / ``subagent_effort``.
    """

    claude_bin: str
    groups: tuple[ToolGroup, ...]
    config: AgentConfig
    control_url: str
    mcp_config_file: Path
    token: str | None = None
    system_prompt_file: Path | None = None
    session_id: str | None = None
    model: str | None = None
    effort: Effort | None = None


def subagent_model(config: AgentConfig, model: str | None = None) -> str:
    """The model a subagent runs on: the one asked for, else the agent's ``subagent_model``."""
    return model or config.subagent_model


def subagent_effort(config: AgentConfig, effort: Effort | None = None) -> Effort:
    """The ``--effort`` a subagent runs at: the one asked for, else ``subagent_effort``."""
    return effort or config.subagent_effort


def agent_mcp_url(base_url: str, agent: str, server: str) -> str:
    """Where the agent host serves ``server`` for ``agent``."""
    return f"{base_url.rstrip('/')}/agents/{agent}/mcp/{server}"


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def harness_servers(spec: LaunchSpec) -> dict[str, McpServer]:
    """The agent's extra servers a turn gets (:func:`hyperhive.effective.turn_servers`)."""
    return turn_servers(spec.config, spec.groups)


def subagent_servers(
    config: AgentConfig, groups: Iterable[ToolGroup] | None = None
) -> dict[str, McpServer]:
    """The agent's extra servers a subagent gets: ``available_to_subagents`` only.

    Never the host's own surfaces (hyperhive, bash, subagent) nor anything
    ``builtin``: those carry the agent's token and its authority. With
    ``groups`` (the parent's), a server gated behind a group it lacks is out too.
    """
    servers = config.servers() if groups is None else config.servers_for(groups)
    return {
        name: server
        for name, server in servers.items()
        if server.available_to_subagents and not server.builtin and name not in _NEVER_FOR_SUBAGENTS
    }


def _render(name: str, server: McpServer, *, builtin_url: str | None, token: str) -> dict[str, Any]:
    if server.builtin:
        if builtin_url is None:
            raise ConfigError(f"MCP server {name!r} is built in and cannot be served here")
        return {
            "type": "http",
            "url": builtin_url,
            "headers": {**server.headers, **_bearer(token)},
        }
    if server.type == "http":
        if not server.url:
            raise ConfigError(f"MCP server {name!r} is type http but has no url")
        return {"type": "http", "url": server.url, "headers": dict(server.headers)}
    if not server.command:
        raise ConfigError(f"MCP server {name!r} is type stdio but has no command")
    return {
        "type": "stdio",
        "command": server.command,
        "args": list(server.args),
        "env": dict(server.env),
    }


def mcp_config(spec: LaunchSpec) -> dict[str, Any]:
    """The ``--mcp-config`` JSON of a harness turn: hyperhive plus the agent's servers."""
    servers: dict[str, Any] = {
        HYPERHIVE_SERVER: {
            "type": "http",
            "url": agent_mcp_url(spec.base_url, spec.agent, HYPERHIVE_SERVER),
            "headers": _bearer(spec.token),
        }
    }
    for name, server in harness_servers(spec).items():
        servers[name] = _render(
            name,
            server,
            builtin_url=agent_mcp_url(spec.base_url, spec.agent, name),
            token=spec.token,
        )
    return {"mcpServers": servers}


def harness_argv(spec: LaunchSpec) -> list[str]:
    """The argv of a harness turn; the prompt goes to stdin (see the module notes)."""
    args = turn_tool_args(spec.config, spec.groups, spec.capabilities)
    argv = [
        spec.claude_bin,
        *_STREAM_FLAGS,
        "--tools",
        args.tools,
        "--allowedTools",
        args.allowed_tools,
        "--mcp-config",
        str(spec.mcp_config_file),
        "--strict-mcp-config",
        "--append-system-prompt-file",
        str(spec.system_prompt_file),
    ]
    if spec.session_id:
        argv += ["--resume", spec.session_id]
    model = spec.model or spec.config.model
    if model:
        argv += ["--model", model]
    return argv


def subagent_mcp_config(spec: SubagentSpec) -> dict[str, Any]:
    """The ``--mcp-config`` JSON of a subagent: its control surface and shared servers only."""
    control: dict[str, Any] = {"type": "http", "url": spec.control_url}
    if spec.token is not None:
        control["headers"] = _bearer(spec.token)
    servers: dict[str, Any] = {SUBAGENT_CONTROL_SERVER: control}
    for name, server in subagent_servers(spec.config, spec.groups).items():
        servers[name] = _render(name, server, builtin_url=None, token="")
    return {"mcpServers": servers}


def subagent_argv(spec: SubagentSpec) -> list[str]:
    """The argv of a subagent; the prompt goes to stdin.

    Two gates, one half each: ``--tools`` (the parent's built-ins, never
    wider) and ``--strict-mcp-config`` (only :func:`subagent_mcp_config`'s
    servers). ``--tools`` does not govern MCP tools, so the signal tools are
    not named in it; ``--allowedTools`` is moot under
    ``--dangerously-skip-permissions``, which is why it is not passed.
    """
    argv = [
        spec.claude_bin,
        *_STREAM_FLAGS,
        "--dangerously-skip-permissions",
        "--tools",
        builtin_tools_arg(spec.groups),
        "--strict-mcp-config",
        "--mcp-config",
        str(spec.mcp_config_file),
        # It shares its agent's HOME, hence the hive's skills, which name tools a
        # subagent lacks. No skills: claude then drops Skill too (nothing to load).
        "--disable-slash-commands",
    ]
    if spec.system_prompt_file is not None:
        argv += ["--append-system-prompt-file", str(spec.system_prompt_file)]
    argv += ["--model", subagent_model(spec.config, spec.model)]
    argv += ["--effort", subagent_effort(spec.config, spec.effort)]
    if spec.session_id:
        argv += ["--resume", spec.session_id]
    return argv


def claude_env(
    base_env: Mapping[str, str],
    home: Path | str,
    passthrough: Iterable[str] = (),
    extra: Mapping[str, str] | None = None,
    *,
    sandboxed: bool = False,
) -> dict[str, str]:
    """The whole environment of a claude process, built rather than inherited.

    ``PATH`` and the ``passthrough`` names (``HiveConfig.env_passthrough``:
    the API key and URL) come from ``base_env``; then :data:`QUIET_ENV`;
    then ``extra`` (the agent config's ``env``, which may override a quiet
    switch); ``HOME`` is always ``home``, where claude keeps its sessions.
    ``sandboxed`` sets ``IS_SANDBOX=1``: claude refuses
    ``--dangerously-skip-permissions`` as uid 0 without it, and a process in
    the agent's sandbox is what that variable asserts.
    """
    env = {"PATH": base_env.get("PATH") or DEFAULT_PATH}
    for name in passthrough:
        value = base_env.get(name)
        if value is not None:
            env[name] = value
    env.update(QUIET_ENV)
    if sandboxed:
        env["IS_SANDBOX"] = "1"
    if extra:
        env.update(extra)
    env["HOME"] = str(home)
    return env
