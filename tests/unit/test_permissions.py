"""hyperhive.permissions: the spec-000 tests plus subset/monotonicity properties."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperhive.permissions import (
    ALLOWED_BUILTIN_TOOLS,
    BASH_SERVER,
    CAPABILITIES_ENV,
    TOOL_GROUPS_ENV,
    Capability,
    McpTool,
    ToolGroup,
    allowed_tools_arg,
    builtin_tools_arg,
    builtin_tools_for,
    capability_tools,
    effective_capabilities,
    effective_tool_groups,
    granted_mcp_tools,
    group_for_tool,
    group_tools,
)

group_sets = st.lists(st.sampled_from(ToolGroup.ALL), unique=True)


def test_group_values_are_the_snake_case_names() -> None:
    assert [g.value for g in ToolGroup.ALL] == [
        "messaging",
        "meta",
        "inbox",
        "lifecycle",
        "approvals",
        "scheduling",
        "diagnostics",
        "execution",
        "web_tools",
        "forge",
    ]
    assert ToolGroup.AGENT_DEFAULT == (
        ToolGroup.MESSAGING,
        ToolGroup.META,
        ToolGroup.INBOX,
        ToolGroup.EXECUTION,
    )
    assert ToolGroup.MANAGER_DEFAULT == (
        *ToolGroup.AGENT_DEFAULT,
        ToolGroup.LIFECYCLE,
        ToolGroup.APPROVALS,
        ToolGroup.SCHEDULING,
        ToolGroup.DIAGNOSTICS,
    )


def test_parse_list_accepts_the_snake_case_names_the_renderer_writes() -> None:
    assert ToolGroup.parse_list("messaging, Meta ,web_tools") == [
        ToolGroup.MESSAGING,
        ToolGroup.META,
        ToolGroup.WEB_TOOLS,
    ]
    for group in ToolGroup.ALL:
        assert ToolGroup.parse_list(str(group)) == [group]
        assert ToolGroup.parse_list(group.value.upper()) == [group]


@pytest.mark.parametrize("raw", ["", " ", ",,", "not_a_group,also_not"])
def test_parse_list_falls_back_to_the_agent_default_rather_than_nothing(raw: str) -> None:
    assert ToolGroup.parse_list(raw) == list(ToolGroup.AGENT_DEFAULT)


def test_unknown_tokens_are_skipped_with_a_warning_naming_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="hyperhive.permissions"):
        assert ToolGroup.parse_list("inbox,bogus_group") == [ToolGroup.INBOX]
    assert "bogus_group" in caplog.text


def test_capabilities_parse_blank_to_nothing_and_skip_unknown() -> None:
    assert Capability.parse_list("") == []
    assert Capability.parse_list(" read_host_journal ,nope") == [Capability.READ_HOST_JOURNAL]
    assert Capability.parse_list("QUERY_AGENT_STATE") == [Capability.QUERY_AGENT_STATE]


def test_effective_groups_and_caps_are_pure_functions_of_the_mapping() -> None:
    assert effective_tool_groups({}) == list(ToolGroup.AGENT_DEFAULT)
    assert effective_tool_groups({TOOL_GROUPS_ENV: "forge"}) == [ToolGroup.FORGE]
    assert effective_capabilities({CAPABILITIES_ENV: "read_host_journal"}) == [
        Capability.READ_HOST_JOURNAL
    ]
    assert effective_capabilities({}) == []


def test_builtin_tools_are_the_base_set_plus_whatever_the_groups_add() -> None:
    assert builtin_tools_for([]) == list(ALLOWED_BUILTIN_TOOLS)
    assert builtin_tools_for(ToolGroup.AGENT_DEFAULT) == list(ALLOWED_BUILTIN_TOOLS)
    for group in ToolGroup.ALL:
        resolved = builtin_tools_for([group])
        assert resolved[: len(ALLOWED_BUILTIN_TOOLS)] == list(ALLOWED_BUILTIN_TOOLS)


def test_base_set_is_the_documented_one() -> None:
    assert ALLOWED_BUILTIN_TOOLS == ("Edit", "Glob", "Grep", "Read", "Skill", "Write")
    for absent in ("Bash", "Task", "Agent", "TodoWrite", "NotebookEdit"):
        assert absent not in builtin_tools_for(ToolGroup.ALL)


def test_web_egress_is_present_only_with_the_web_tools_group() -> None:
    with_web = builtin_tools_for([ToolGroup.WEB_TOOLS])
    assert "WebFetch" in with_web and "WebSearch" in with_web
    without = builtin_tools_for(ToolGroup.MANAGER_DEFAULT)
    assert "WebFetch" not in without and "WebSearch" not in without
    assert group_tools(ToolGroup.WEB_TOOLS) == ()


def test_no_group_combination_resolves_to_an_empty_tools_arg() -> None:
    assert builtin_tools_arg([])
    assert builtin_tools_arg(ToolGroup.ALL)
    assert all(t.strip() for t in builtin_tools_arg(ToolGroup.ALL).split(","))


def test_empty_resolution_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import hyperhive.permissions as permissions

    monkeypatch.setattr(permissions, "ALLOWED_BUILTIN_TOOLS", ())
    with pytest.raises(ValueError, match="empty --tools"):
        permissions.builtin_tools_arg([])


def test_the_builtin_list_names_no_mcp_tools() -> None:
    for tool in builtin_tools_for(ToolGroup.ALL):
        assert "__" not in tool


def test_group_tool_table() -> None:
    def names(group: ToolGroup) -> list[str]:
        return [t.name for t in group_tools(group)]

    assert names(ToolGroup.MESSAGING) == ["send", "recv", "ack_until", "ask_operator"]
    assert names(ToolGroup.INBOX) == ["get_loose_ends", "cancel_loose_end", "remind"]
    assert names(ToolGroup.META) == ["set_status", "get_agent_meta"]
    assert group_tools(ToolGroup.EXECUTION) == tuple(
        McpTool(BASH_SERVER, n) for n in ("run", "status", "kill")
    )
    assert names(ToolGroup.LIFECYCLE) == [
        "request_init_config",
        "kill",
        "start",
        "restart",
        "update",
        "destroy",
    ]
    assert names(ToolGroup.APPROVALS) == ["request_apply_commit"]
    assert names(ToolGroup.SCHEDULING) == ["schedule_prompt", "list_schedules", "cancel_schedule"]
    assert names(ToolGroup.DIAGNOSTICS) == ["get_logs", "get_turns"]
    assert names(ToolGroup.FORGE) == ["create_repo"]
    journal = capability_tools(Capability.READ_HOST_JOURNAL)
    assert [t.qualified for t in journal] == ["mcp__hyperhive__get_host_journal"]
    assert capability_tools(Capability.QUERY_AGENT_STATE) == ()


def test_compact_is_always_on_and_in_no_group() -> None:
    compact = McpTool("hyperhive", "compact")
    assert group_for_tool("hyperhive", "compact") is None
    assert compact in granted_mcp_tools([])
    assert all(compact not in group_tools(g) for g in ToolGroup.ALL)


def test_group_for_tool_distinguishes_servers() -> None:
    # "kill" exists on both servers, in different groups.
    assert group_for_tool("hyperhive", "kill") is ToolGroup.LIFECYCLE
    assert group_for_tool("bash", "kill") is ToolGroup.EXECUTION
    assert group_for_tool("hyperhive", "nonexistent") is None


def test_allowed_tools_arg_layout() -> None:
    arg = allowed_tools_arg(
        ToolGroup.AGENT_DEFAULT,
        [Capability.READ_HOST_JOURNAL],
        {"matrix": ["*"], "notes": ["read"]},
    ).split(",")
    assert arg[:6] == list(ALLOWED_BUILTIN_TOOLS)
    assert "mcp__hyperhive__send" in arg
    assert "mcp__bash__run" in arg and "mcp__bash__kill" in arg
    assert "mcp__hyperhive__compact" in arg
    assert "mcp__hyperhive__get_host_journal" in arg
    assert "mcp__matrix__*" in arg
    assert "mcp__notes__read" in arg
    assert "mcp__hyperhive__kill" not in arg  # lifecycle not granted
    assert len(arg) == len(set(arg))


def test_bash_tools_are_gated_by_execution() -> None:
    without = allowed_tools_arg([ToolGroup.MESSAGING])
    assert "mcp__bash__" not in without
    assert "mcp__bash__run" in allowed_tools_arg([ToolGroup.EXECUTION])


@given(group_sets, group_sets)
def test_builtins_are_monotone_in_the_groups(a: list[ToolGroup], b: list[ToolGroup]) -> None:
    subset = builtin_tools_for(a)
    superset = builtin_tools_for(a + [g for g in b if g not in a])
    assert set(subset) <= set(superset)
    for base in ALLOWED_BUILTIN_TOOLS:
        assert base in superset


@given(group_sets)
def test_tools_arg_never_holds_an_mcp_name_and_is_never_empty(groups: list[ToolGroup]) -> None:
    value = builtin_tools_arg(groups)
    assert value
    assert "mcp__" not in value
    assert value.split(",") == builtin_tools_for(groups)


@given(group_sets, st.lists(st.sampled_from(list(Capability)), unique=True))
def test_allowed_tools_builtin_half_is_builtin_tools_for(
    groups: list[ToolGroup], caps: list[Capability]
) -> None:
    names = allowed_tools_arg(groups, caps).split(",")
    builtins = [n for n in names if not n.startswith("mcp__")]
    assert builtins == builtin_tools_for(groups)
    for group in groups:
        for tool in group_tools(group):
            assert tool.qualified in names
