"""The pure argv / MCP config / environment builders of ``hyperhive.agent.launch``."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from hyperhive.agent.launch import (
    QUIET_ENV,
    SUBAGENT_CONTROL_SERVER,
    LaunchSpec,
    SubagentSpec,
    agent_mcp_url,
    claude_env,
    harness_argv,
    mcp_config,
    subagent_argv,
    subagent_mcp_config,
)
from hyperhive.config import AgentConfig
from hyperhive.errors import ConfigError
from hyperhive.permissions import (
    ALLOWED_BUILTIN_TOOLS,
    Capability,
    ToolGroup,
    builtin_tools_arg,
    builtin_tools_for,
)

BASE = "http://127.0.0.1:4321"
# Every combination of groups: 2^10, cheap enough to check exhaustively.
ALL_SUBSETS = [
    combo for n in range(len(ToolGroup.ALL) + 1) for combo in combinations(ToolGroup.ALL, n)
]
group_subsets = st.lists(st.sampled_from(ToolGroup.ALL), unique=True).map(tuple)


def config(**data: Any) -> AgentConfig:
    return AgentConfig.model_validate(data)


def spec(
    groups: tuple[ToolGroup, ...] = ToolGroup.AGENT_DEFAULT,
    cfg: AgentConfig | None = None,
    **kw: Any,
) -> LaunchSpec:
    fields: dict[str, Any] = {
        "agent": "alice",
        "claude_bin": "/opt/claude",
        "groups": groups,
        "capabilities": (),
        "config": cfg or AgentConfig(),
        "base_url": BASE,
        "token": "tok-alice",
        "mcp_config_file": Path("/run/alice/mcp.json"),
        "system_prompt_file": Path("/run/alice/system.md"),
    }
    fields.update(kw)
    return LaunchSpec(**fields)


def sub(
    groups: tuple[ToolGroup, ...] = ToolGroup.AGENT_DEFAULT,
    cfg: AgentConfig | None = None,
    **kw: Any,
) -> SubagentSpec:
    fields: dict[str, Any] = {
        "claude_bin": "/opt/claude",
        "groups": groups,
        "config": cfg or AgentConfig(),
        "control_url": f"{BASE}/agents/alice/subagents/s1/control",
        "mcp_config_file": Path("/run/alice/sub-s1.json"),
    }
    fields.update(kw)
    return SubagentSpec(**fields)


def flag(argv: list[str], name: str) -> str:
    assert argv.count(name) == 1, f"{name} appears {argv.count(name)} times in {argv}"
    return argv[argv.index(name) + 1]


# -- harness argv -------------------------------------------------------------


def test_harness_argv_shape() -> None:
    argv = harness_argv(spec())
    assert argv[:5] == ["/opt/claude", "--print", "--output-format", "stream-json", "--verbose"]
    assert flag(argv, "--tools") == "Edit,Glob,Grep,Read,Skill,Write"
    assert flag(argv, "--mcp-config") == "/run/alice/mcp.json"
    assert flag(argv, "--append-system-prompt-file") == "/run/alice/system.md"
    assert "--strict-mcp-config" in argv
    assert "--resume" not in argv and "--model" not in argv
    assert "--dangerously-skip-permissions" not in argv


def test_harness_argv_has_no_positional_prompt() -> None:
    # Every element after the binary is a flag or the value of the flag before it.
    argv = harness_argv(spec(session_id="s-1", model="opus"))
    valued = {
        "--output-format",
        "--tools",
        "--allowedTools",
        "--mcp-config",
        "--append-system-prompt-file",
        "--resume",
        "--model",
    }
    i = 1
    while i < len(argv):
        assert argv[i].startswith("--"), argv[i]
        i += 2 if argv[i] in valued else 1


def test_resume_and_model() -> None:
    argv = harness_argv(spec(session_id="abc-123"))
    assert flag(argv, "--resume") == "abc-123"
    assert flag(harness_argv(spec(cfg=config(model="sonnet"))), "--model") == "sonnet"
    assert flag(harness_argv(spec(cfg=config(model="sonnet"), model="opus")), "--model") == "opus"


def test_tools_is_never_empty_and_matches_permissions() -> None:
    for groups in ALL_SUBSETS:
        value = flag(harness_argv(spec(groups)), "--tools")
        assert value
        assert value == builtin_tools_arg(groups)
        assert set(ALLOWED_BUILTIN_TOOLS) <= set(value.split(","))
        web = {"WebFetch", "WebSearch"} <= set(value.split(","))
        assert web == (ToolGroup.WEB_TOOLS in groups), groups


def test_allowed_tools_covers_builtins_granted_mcp_tools_and_extra_servers() -> None:
    cfg = config(
        mcp_servers={
            "notes": {"command": "notes-mcp", "allowed_tools": ["read", "write"]},
            "chat": {"type": "http", "url": "https://chat.example/mcp", "allowed_tools": ["*"]},
        }
    )
    groups = (*ToolGroup.AGENT_DEFAULT, ToolGroup.WEB_TOOLS)
    allowed = flag(
        harness_argv(spec(groups, cfg, capabilities=(Capability.READ_HOST_JOURNAL,))),
        "--allowedTools",
    ).split(",")
    assert set(builtin_tools_for(groups)) <= set(allowed)
    for name in (
        "mcp__hyperhive__send",
        "mcp__hyperhive__compact",
        "mcp__hyperhive__get_host_journal",
        "mcp__bash__run",
        "mcp__subagent__*",
        "mcp__notes__read",
        "mcp__notes__write",
        "mcp__chat__*",
    ):
        assert name in allowed
    assert "mcp__hyperhive__request_apply_commit" not in allowed
    assert len(allowed) == len(set(allowed))


def test_bash_override_is_not_allowed_without_execution() -> None:
    cfg = config(mcp_servers={"bash": {"type": "http", "builtin": True, "allowed_tools": ["*"]}})
    groups = (ToolGroup.MESSAGING,)
    allowed = flag(harness_argv(spec(groups, cfg)), "--allowedTools")
    assert "mcp__bash__" not in allowed
    assert "bash" not in mcp_config(spec(groups, cfg))["mcpServers"]


# -- harness MCP config -------------------------------------------------------


def test_mcp_config_default_agent() -> None:
    servers = mcp_config(spec())["mcpServers"]
    assert servers == {
        "hyperhive": {
            "type": "http",
            "url": f"{BASE}/agents/alice/mcp/hyperhive",
            "headers": {"Authorization": "Bearer tok-alice"},
        },
        "bash": {
            "type": "http",
            "url": f"{BASE}/agents/alice/mcp/bash",
            "headers": {"Authorization": "Bearer tok-alice"},
        },
        "subagent": {
            "type": "http",
            "url": f"{BASE}/agents/alice/mcp/subagent",
            "headers": {"Authorization": "Bearer tok-alice"},
        },
    }


def test_bash_entry_only_with_execution() -> None:
    for groups in ALL_SUBSETS:
        servers = mcp_config(spec(groups))["mcpServers"]
        assert ("bash" in servers) == (ToolGroup.EXECUTION in groups), groups
        assert "hyperhive" in servers and "subagent" in servers


def test_trailing_slash_in_base_url() -> None:
    assert agent_mcp_url(BASE + "/", "bob", "bash") == f"{BASE}/agents/bob/mcp/bash"
    url = mcp_config(spec(base_url=BASE + "/"))["mcpServers"]["hyperhive"]["url"]
    assert url == f"{BASE}/agents/alice/mcp/hyperhive"


def test_extra_servers_rendered_and_disabled_ones_dropped() -> None:
    cfg = config(
        mcp_servers={
            "notes": {"command": "notes-mcp", "args": ["--dir", "/state"], "env": {"A": "1"}},
            "chat": {
                "type": "http",
                "url": "https://chat.example/mcp",
                "headers": {"X-Key": "k"},
            },
            "subagent": {"type": "http", "builtin": True, "enabled": False},
        }
    )
    servers = mcp_config(spec(cfg=cfg))["mcpServers"]
    assert servers["notes"] == {
        "type": "stdio",
        "command": "notes-mcp",
        "args": ["--dir", "/state"],
        "env": {"A": "1"},
    }
    assert servers["chat"] == {
        "type": "http",
        "url": "https://chat.example/mcp",
        "headers": {"X-Key": "k"},
    }
    assert "subagent" not in servers
    assert set(servers) == {"hyperhive", "bash", "notes", "chat"}


def test_incomplete_servers_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="'notes'.*no command"):
        mcp_config(spec(cfg=config(mcp_servers={"notes": {"type": "stdio"}})))
    with pytest.raises(ConfigError, match="'chat'.*no url"):
        mcp_config(spec(cfg=config(mcp_servers={"chat": {"type": "http"}})))


# -- subagents ----------------------------------------------------------------


def test_subagent_argv_shape() -> None:
    argv = subagent_argv(sub())
    assert argv[:5] == ["/opt/claude", "--print", "--output-format", "stream-json", "--verbose"]
    assert "--dangerously-skip-permissions" in argv
    assert "--strict-mcp-config" in argv
    assert flag(argv, "--tools") == builtin_tools_arg(ToolGroup.AGENT_DEFAULT)
    assert flag(argv, "--mcp-config") == "/run/alice/sub-s1.json"
    assert flag(argv, "--model") == "haiku"
    assert "--allowedTools" not in argv
    assert "--append-system-prompt-file" not in argv
    assert "--resume" not in argv
    assert flag(argv, "--effort") == "low"  # the hive's default, cheaper than claude's
    assert "--disable-slash-commands" in argv  # the hive's skills are not for subagents


def test_subagent_argv_options() -> None:
    argv = subagent_argv(
        sub(
            cfg=config(subagent_model="sonnet", subagent_effort="medium"),
            system_prompt_file=Path("/run/alice/task.md"),
            session_id="sess-9",
        )
    )
    assert flag(argv, "--append-system-prompt-file") == "/run/alice/task.md"
    assert flag(argv, "--model") == "sonnet"
    assert flag(argv, "--effort") == "medium"
    assert flag(argv, "--resume") == "sess-9"
    argv = subagent_argv(sub(model="opus", effort="high"))
    assert flag(argv, "--model") == "opus" and flag(argv, "--effort") == "high"
    with pytest.raises(ValidationError, match="'low', 'medium', 'high', 'xhigh' or 'max'"):
        config(subagent_effort="lowest")


ESCAPING = (
    "Bash",
    "SendMessage",
    "ListAgents",
    "Task",
    "Agent",
    "TaskStop",
    "TaskOutput",
    "CronCreate",
    "CronDelete",
    "RemoteTrigger",
    "EnterWorktree",
    "ExitWorktree",
)


@given(group_subsets)
def test_subagent_tools_are_a_nonempty_subset_of_the_parents(groups: tuple[ToolGroup, ...]) -> None:
    parent = set(flag(harness_argv(spec(groups)), "--tools").split(","))
    child = flag(subagent_argv(sub(groups)), "--tools").split(",")
    assert child
    assert set(child) <= parent
    assert not set(child) & set(ESCAPING)
    assert ({"WebFetch", "WebSearch"} <= set(child)) == (ToolGroup.WEB_TOOLS in groups)


def test_subagent_mcp_config_default_is_control_only() -> None:
    assert subagent_mcp_config(sub()) == {
        "mcpServers": {
            SUBAGENT_CONTROL_SERVER: {
                "type": "http",
                "url": f"{BASE}/agents/alice/subagents/s1/control",
            }
        }
    }
    control = subagent_mcp_config(sub(token="t-1"))["mcpServers"][SUBAGENT_CONTROL_SERVER]
    assert control["headers"] == {"Authorization": "Bearer t-1"}


def test_subagent_gets_only_servers_marked_available() -> None:
    cfg = config(
        mcp_servers={
            "shared": {"command": "shared-mcp", "available_to_subagents": True},
            "private": {"command": "private-mcp"},
            "web": {
                "type": "http",
                "url": "https://x.example/mcp",
                "available_to_subagents": True,
                "enabled": False,
            },
        }
    )
    servers = subagent_mcp_config(sub(cfg=cfg))["mcpServers"]
    assert set(servers) == {SUBAGENT_CONTROL_SERVER, "shared"}
    assert servers["shared"]["command"] == "shared-mcp"


@given(
    bash_shared=st.booleans(),
    subagent_shared=st.booleans(),
    bash_builtin=st.booleans(),
    control_shared=st.booleans(),
    groups=group_subsets,
)
def test_subagent_never_reaches_the_hosts_surfaces(
    bash_shared: bool,
    subagent_shared: bool,
    bash_builtin: bool,
    control_shared: bool,
    groups: tuple[ToolGroup, ...],
) -> None:
    bash: dict[str, Any] = {"available_to_subagents": bash_shared}
    bash.update({"type": "http", "builtin": True} if bash_builtin else {"command": "my-bash-mcp"})
    cfg = config(
        mcp_servers={
            "bash": bash,
            "subagent": {
                "type": "http",
                "builtin": True,
                "available_to_subagents": subagent_shared,
            },
            SUBAGENT_CONTROL_SERVER: {
                "command": "impostor",
                "available_to_subagents": control_shared,
            },
        }
    )
    servers = subagent_mcp_config(sub(groups, cfg))["mcpServers"]
    assert set(servers) == {SUBAGENT_CONTROL_SERVER}
    assert servers[SUBAGENT_CONTROL_SERVER]["type"] == "http"


# -- environment --------------------------------------------------------------


def test_claude_env_is_built_not_inherited() -> None:
    base = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "ANTHROPIC_API_KEY": "sk-1",
        "AWS_SECRET_ACCESS_KEY": "nope",
    }
    env = claude_env(base, Path("/hive/agents/a/home"), ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"])
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "/hive/agents/a/home",
        "ANTHROPIC_API_KEY": "sk-1",
        **QUIET_ENV,
    }


def test_claude_env_extra_sandboxed_and_home_always_wins() -> None:
    env = claude_env(
        {},
        "/h",
        extra={"ENABLE_TOOL_SEARCH": "true", "HOME": "/elsewhere", "FOO": "bar"},
        sandboxed=True,
    )
    assert env["HOME"] == "/h"
    assert env["PATH"]
    assert env["ENABLE_TOOL_SEARCH"] == "true"
    assert env["FOO"] == "bar"
    assert env["IS_SANDBOX"] == "1"
    assert "IS_SANDBOX" not in claude_env({}, "/h")
    assert QUIET_ENV["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
