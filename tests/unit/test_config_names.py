"""hyperhive.config and hyperhive.names."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperhive.config import (
    AgentConfig,
    HivePaths,
    dump_agent_config,
    load_agent_config,
    load_hive_config,
    parse_agent_config,
    resolve_home,
)
from hyperhive.errors import ConfigError, InvalidName
from hyperhive.names import (
    AGENT_NAME_MAX,
    RESERVED_NAMES,
    listed,
    system_user,
    validate_agent_name,
    validate_task_name,
)
from hyperhive.permissions import Capability, ToolGroup


def test_agent_names() -> None:
    for good in ("a", "alice", "web-2", "x" * AGENT_NAME_MAX):
        assert validate_agent_name(good) == good
    for bad in ("", "Alice", "2x", "a_b", "a-", "a--b", "x" * (AGENT_NAME_MAX + 1), "../a", "a b"):
        with pytest.raises(InvalidName):
            validate_agent_name(bad)
    for reserved in RESERVED_NAMES:
        with pytest.raises(InvalidName, match="reserved|must"):
            validate_agent_name(reserved)
    assert system_user("a1b2c3", "alice") == "hh-a1b2c3-alice"
    assert system_user("a1b2c3", "alice") != system_user("zzzzzz", "alice")
    longest = system_user("a1b2c3", "x" * AGENT_NAME_MAX)
    assert len(longest) == 32 and longest.startswith("hh-a1b2c3-xxx")
    # Cut names keep a hash of the whole name: two long names never share a user.
    twins = {system_user("a1b2c3", "x" * 20 + suffix) for suffix in ("-one", "-two", "-tre")}
    assert len(twins) == 3 and all(len(u) <= 32 for u in twins)
    assert system_user("a1b2c3", "x" * 22) == "hh-a1b2c3-" + "x" * 22  # fits: kept whole
    with pytest.raises(InvalidName):
        system_user("../etc", "alice")


def test_task_names() -> None:
    assert validate_task_name("build-1") == "build-1"
    assert validate_task_name("0") == "0"
    for bad in ("", "A", "a_b", "x" * 64, "a/b"):
        with pytest.raises(InvalidName, match=r"\[a-z0-9-\]"):
            validate_task_name(bad)


def test_agent_config_defaults_and_default_servers() -> None:
    cfg = parse_agent_config("")
    assert cfg.tool_groups == list(ToolGroup.AGENT_DEFAULT)
    assert set(cfg.servers()) == {"bash", "subagent"}
    assert cfg.servers()["bash"].builtin


def test_agent_config_overrides_and_disables_default_servers() -> None:
    cfg = parse_agent_config(
        """
model = "opus"
tool_groups = ["messaging", "web_tools"]
capabilities = ["read_host_journal"]

[mcp_servers.bash]
enabled = false

[mcp_servers.matrix]
type = "stdio"
command = "matrix-mcp"
allowed_tools = ["*"]
available_to_subagents = true

[limits]
memory_mb = 512
"""
    )
    assert cfg.model == "opus"
    assert cfg.capabilities == [Capability.READ_HOST_JOURNAL]
    assert set(cfg.servers()) == {"subagent", "matrix"}
    assert cfg.servers()["matrix"].available_to_subagents
    assert cfg.limits.memory_mb == 512
    assert parse_agent_config(dump_agent_config(cfg)) == cfg


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ('model = "x"\ntool_groups = ["messaging", 7]\n', 2, "tool_groups"),
        ('model = "x"\n\nmodle = "y"\n', 3, "unknown setting"),
        ('model = "x"\ntool_groups = [\n', 2, "not valid TOML"),
        ("[limits]\nmemory_mb = 1\n", 2, "memory_mb"),
        ("tool_groups = []\n", 1, "may not be empty"),
        ('[mcp_servers.hyperhive]\ntype = "http"\n', 1, "built-in surface"),
        ('[mcp_servers.x]\ntype = "http"\nurl = "ftp://h"\n', 3, "http://"),
    ],
)
def test_bad_agent_config_names_file_line_and_problem(text: str, line: int, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_agent_config(text, "agents/x/agent.toml")
    assert info.value.line == line
    assert str(info.value).startswith(f"agents/x/agent.toml:{line}: ")
    assert fragment in str(info.value)


def test_a_stale_tool_group_is_skipped_with_a_warning_not_fatal() -> None:
    cfg = parse_agent_config('tool_groups = ["messaging", "Telepathy ", "META"]\n')
    assert cfg.tool_groups == [ToolGroup.MESSAGING, ToolGroup.META]
    assert len(cfg.warnings) == 1
    assert "'telepathy'" in cfg.warnings[0] and "known: messaging" in cfg.warnings[0]
    assert "default groups" not in cfg.warnings[0]
    # Written back, the stale name is gone (and so is the warning).
    again = parse_agent_config(dump_agent_config(cfg))
    assert again.tool_groups == cfg.tool_groups and again.warnings == ()
    assert parse_agent_config("").warnings == ()


def test_only_stale_tool_groups_fall_back_to_the_default_groups() -> None:
    cfg = parse_agent_config('tool_groups = ["telepathy", "forge_v0"]\n')
    assert cfg.tool_groups == list(ToolGroup.AGENT_DEFAULT)
    assert "default groups apply" in cfg.warnings[0] and "'forge_v0'" in cfg.warnings[0]


def test_servers_for_gates_bash_and_grouped_servers() -> None:
    cfg = parse_agent_config(
        '[mcp_servers.search]\ncommand = "s"\ntool_group = "web_tools"\n'
        '[mcp_servers.notes]\ncommand = "n"\nallowed_tools = ["read"]\n'
    )
    assert cfg.servers()["notes"].allowed_tools == ["read"]
    assert cfg.servers()["search"].allowed_tools == ["*"]  # a declared server is usable
    assert set(cfg.servers_for([ToolGroup.MESSAGING])) == {"subagent", "notes"}
    assert set(cfg.servers_for([ToolGroup.EXECUTION, ToolGroup.WEB_TOOLS])) == {
        "bash",
        "subagent",
        "notes",
        "search",
    }
    with pytest.raises(ConfigError, match="tool_group"):
        parse_agent_config('[mcp_servers.x]\ncommand = "x"\ntool_group = "telepathy"\n')


def test_load_agent_config_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_agent_config(tmp_path / "nope.toml")


def test_hive_config(tmp_path: Path) -> None:
    assert load_hive_config(tmp_path, {}).root_agent == "queen"
    (tmp_path / "hive.toml").write_text('root_agent = "ruth"\nruntime = "unsandboxed"\n')
    cfg = load_hive_config(tmp_path, {"HIVE_REMIND_MAX_PENDING_PER_AGENT": "7"})
    assert cfg.root_agent == "ruth" and cfg.runtime == "unsandboxed"
    assert cfg.remind_max_pending == 7
    assert cfg.env_passthrough == [
        "ANTHROPIC_API_KEY",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
    ]
    (tmp_path / "hive.toml").write_text('runtime = "docker"\n')
    with pytest.raises(ConfigError, match=r"hive.toml:1: runtime"):
        load_hive_config(tmp_path, {})
    (tmp_path / "hive.toml").write_text('root_agent = "Bad Name"\n')
    with pytest.raises(ConfigError, match="root_agent"):
        load_hive_config(tmp_path, {})


def test_hive_config_store_url(tmp_path: Path) -> None:
    assert load_hive_config(tmp_path, {}).store is None
    (tmp_path / "hive.toml").write_text('store = "postgresql://hive@db/hive"\n')
    assert load_hive_config(tmp_path, {}).store == "postgresql://hive@db/hive"
    env = {"HIVE_STORE_URL": "postgres://other@/hive?host=/run/pg"}
    assert load_hive_config(tmp_path, env).store == "postgres://other@/hive?host=/run/pg"
    with pytest.raises(ConfigError, match="HIVE_STORE_URL: .*postgresql://"):
        load_hive_config(tmp_path, {"HIVE_STORE_URL": "mysql://x/y"})
    (tmp_path / "hive.toml").write_text('store = "sqlite:///tmp/x.db"\n')
    with pytest.raises(ConfigError, match=r"hive.toml:1: store"):
        load_hive_config(tmp_path, {})


def test_resolve_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIVE_HOME", str(tmp_path / "env"))
    assert resolve_home() == tmp_path / "env"
    assert resolve_home(tmp_path / "flag") == tmp_path / "flag"
    monkeypatch.delenv("HIVE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_home(euid=1000) == tmp_path / ".local" / "share" / "hyperhive"
    assert resolve_home(euid=0) == Path("/var/lib/hyperhive")


def test_paths() -> None:
    paths = HivePaths(Path("/h"))
    assert paths.agent_sock("a") == Path("/h/run/agents/a.sock")
    assert paths.host_sock == Path("/h/run/host.sock")
    assert paths.topology == Path("/h/meta/topology.json")
    assert paths.agent_state("a") == Path("/h/agents/a/state")
    assert AgentConfig().subagent_model == "haiku"


def test_a_config_being_proposed_is_held_to_known_groups() -> None:
    text = 'model = "x"\ntool_groups = ["messaging", "telepathy"]\n'
    with pytest.raises(ConfigError, match="'telepathy' skipped") as info:
        parse_agent_config(text, "w/agent.toml", strict=True)
    assert info.value.line == 2
    assert parse_agent_config(text).tool_groups == [ToolGroup.MESSAGING]


def test_a_long_list_of_names_is_cut_with_a_count() -> None:
    names = [f"a{i}" for i in range(1000)]
    line = listed(names)
    assert line.startswith("a0, a1, ") and line.endswith("a19 and 980 more")
    assert listed(names[:3]) == "a0, a1, a2"
    assert listed(names[:20], shown=20) == ", ".join(names[:20])
    assert listed([], empty="no agents") == "no agents"
