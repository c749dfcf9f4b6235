"""Every tool offered exists: three views of an agent's MCP tools are one set.

For any tool groups and capabilities (and the built-in servers on or off):

- what claude is offered: the servers of the agent's ``--mcp-config`` and,
  for each, the tools the host's real surface lists for that agent;
- what ``permissions.granted_mcp_tools`` grants (plus the ``"*"`` servers);
- the MCP half of ``--allowedTools``.

A name in one and not the others is a tool the model is told about but
cannot call, or may call but is never shown.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from hyperhive.agent.host import AgentHost
from hyperhive.agent.launch import LaunchSpec, harness_argv, mcp_config
from hyperhive.agent.spec import AgentSpec
from hyperhive.config import AgentConfig, HiveConfig, HivePaths, McpServer
from hyperhive.matrix.config import AgentMatrixConfig
from hyperhive.permissions import (
    Capability,
    ToolGroup,
    capability_tools,
    granted_mcp_tools,
    group_tools,
)

HOME = Path("/nonexistent/hyperhive-home")  # nothing is written: the host is never run
HOST = AgentHost(HivePaths(HOME), HiveConfig(runtime="unsandboxed"))

groups_st = st.lists(st.sampled_from(ToolGroup.ALL), min_size=1, unique=True)
caps_st = st.lists(st.sampled_from(list(Capability)), unique=True)


def _agent(groups: list[ToolGroup], caps: list[Capability], config: AgentConfig) -> AgentSpec:
    resolved = config.model_copy(update={"tool_groups": groups, "capabilities": caps})
    return AgentSpec(name="alice", config=resolved, paths=HOST.paths, hive=HOST.hive)


def _spec(rt: AgentSpec) -> LaunchSpec:
    return LaunchSpec(
        agent=rt.name,
        claude_bin="claude",
        groups=rt.groups,
        capabilities=rt.capabilities,
        config=rt.config,
        base_url="http://127.0.0.1:1",
        token="t",
        mcp_config_file=Path("mcp.json"),
        system_prompt_file=Path("system.md"),
    )


def offered(rt: AgentSpec) -> set[str]:
    """What claude is offered: each configured server's tools, as its surface lists them."""
    names: set[str] = set()
    for server in mcp_config(_spec(rt))["mcpServers"]:
        surface = HOST.surfaces[server]  # only the host's own surfaces here
        names |= {f"mcp__{server}__{t}" for t in surface.listed_for(rt)}
    return names


def allowed_mcp(rt: AgentSpec) -> list[str]:
    argv = harness_argv(_spec(rt))
    allowed = argv[argv.index("--allowedTools") + 1].split(",")
    return [a for a in allowed if a.startswith("mcp__")]


@settings(max_examples=300, deadline=None)
@given(
    groups=groups_st,
    caps=caps_st,
    bash_on=st.booleans(),
    subagent_on=st.booleans(),
    matrix_on=st.booleans(),
)
def test_offered_listed_and_allowed_are_one_set(
    groups: list[ToolGroup],
    caps: list[Capability],
    bash_on: bool,
    subagent_on: bool,
    matrix_on: bool,
) -> None:
    servers = {
        name: McpServer(enabled=False)
        for name, on in (("bash", bash_on), ("subagent", subagent_on))
        if not on
    }
    matrix = AgentMatrixConfig(enabled=matrix_on)
    rt = _agent(groups, caps, AgentConfig(tool_groups=groups, mcp_servers=servers, matrix=matrix))
    shown = offered(rt)
    patterns = allowed_mcp(rt)

    # Every allowed name or pattern matches a tool that is offered (no dead entries) …
    for pattern in patterns:
        assert fnmatch.filter(shown, pattern), f"{pattern} is allowed but nothing serves it"
    # … and every offered tool is allowed (under --print an unallowed tool is refused).
    for name in shown:
        assert any(fnmatch.fnmatchcase(name, p) for p in patterns), f"{name} offered, not allowed"

    # What permissions grants is exactly what the group-gated surfaces list.
    granted = {
        t.qualified
        for t in granted_mcp_tools(groups, caps)
        if t.server != "bash" or bash_on  # a disabled bash entry takes its tools with it
    }
    ungated = ("mcp__subagent__", "mcp__matrix__")  # served whole, not per tool group
    assert granted == {n for n in shown if not n.startswith(ungated)}
    assert any(n.startswith("mcp__subagent__") for n in shown) == subagent_on
    # The matrix tools: all five exactly when the agent's [matrix] is enabled.
    matrix_tools = {n for n in shown if n.startswith("mcp__matrix__")}
    assert matrix_tools == (
        {f"mcp__matrix__{t}" for t in ("send", "read", "rooms", "join", "leave")}
        if matrix_on
        else set()
    )


def test_every_tool_the_permissions_table_grants_is_served() -> None:
    """The permissions table names no tool that no surface serves (forge's create_repo did)."""
    served = {(name, t) for name, s in HOST.surfaces.items() for t in s.tools}
    for group in ToolGroup.ALL:
        for tool in group_tools(group):
            assert (tool.server, tool.name) in served, f"{group}: {tool.qualified} is not served"
    for cap in Capability:
        for tool in capability_tools(cap):
            assert (tool.server, tool.name) in served
