"""What a config amounts to (``hyperhive.effective``): the same tool arguments as the
harness's argv, and an agent.toml with every default written out."""

from __future__ import annotations

import tomllib
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from hyperhive.agent.launch import LaunchSpec, harness_argv
from hyperhive.config import AgentConfig, McpServer, dump_agent_config, parse_agent_config
from hyperhive.effective import effective_config, effective_toml, turn_tool_args
from hyperhive.permissions import Capability, ToolGroup

groups = st.lists(st.sampled_from(ToolGroup.ALL), unique=True, min_size=1)
caps = st.lists(st.sampled_from(list(Capability)), unique=True)


def argv_values(cfg: AgentConfig) -> tuple[str, str]:
    """``--tools`` and ``--allowedTools`` as a real turn of ``cfg`` is launched with."""
    argv = harness_argv(
        LaunchSpec(
            agent="gina",
            claude_bin="/opt/claude",
            groups=tuple(cfg.tool_groups),
            capabilities=tuple(cfg.capabilities),
            config=cfg,
            base_url="http://127.0.0.1:1",
            token="t",
            mcp_config_file=Path("/x/mcp.json"),
            system_prompt_file=Path("/x/prompt.md"),
        )
    )
    return argv[argv.index("--tools") + 1], argv[argv.index("--allowedTools") + 1]


@given(groups, caps, st.booleans())
def test_the_effective_view_shows_exactly_the_turns_tool_arguments(
    picked: list[ToolGroup], capabilities: list[Capability], chat: bool
) -> None:
    servers = {"chat": McpServer(command="chat-bridge", allowed_tools=["post"])} if chat else {}
    cfg = AgentConfig(tool_groups=picked, capabilities=capabilities, mcp_servers=servers)
    view = effective_config("gina", "queen", cfg)
    assert (view.tools_arg, view.allowed_tools_arg) == argv_values(cfg)
    assert view.tool_groups == [g.value for g in picked]
    assert view.capabilities == [c.value for c in capabilities]
    assert ("chat" in view.mcp_servers) == chat and view.mcp_servers[0] == "hyperhive"
    # bash is offered only with execution, in the list and in --allowedTools alike.
    has_exec = ToolGroup.EXECUTION in picked
    assert ("bash" in view.mcp_servers) == has_exec
    assert ("mcp__bash__run" in view.allowed_tools_arg) == has_exec


def test_an_empty_config_is_shown_with_every_default_filled_in() -> None:
    empty = parse_agent_config("", "gina/agent.toml")
    assert dump_agent_config(empty) == ""  # what the approval used to show: nothing
    view = effective_config("gina", None, empty)
    data = tomllib.loads(view.toml)
    assert data["tool_groups"] == [g.value for g in ToolGroup.AGENT_DEFAULT]
    assert data["subagent_model"] == "haiku"
    assert data["limits"] == {} and data["capabilities"] == []
    assert set(data["mcp_servers"]) == {"bash", "subagent"}
    assert data["mcp_servers"]["subagent"]["allowed_tools"] == ["*"]
    assert view.parent is None and view.as_json()["toml"] == view.toml


@given(groups, st.booleans())
def test_the_effective_toml_is_the_same_agent(picked: list[ToolGroup], drop_bash: bool) -> None:
    servers = {"bash": McpServer(type="http", builtin=True, enabled=False)} if drop_bash else {}
    cfg = AgentConfig(tool_groups=picked, mcp_servers=servers, model="opus")
    again = parse_agent_config(effective_toml(cfg))
    assert again.servers() == cfg.servers()
    assert again.model_dump(exclude={"mcp_servers"}) == cfg.model_dump(exclude={"mcp_servers"})
    assert turn_tool_args(again) == turn_tool_args(cfg)
