"""hyperhive.permissions: the spec-000 tests, the spec's grant table held against the tool
declarations, and subset/monotonicity properties."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

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
from hyperhive.tools.catalog import BY_MODULE
from hyperhive.tools.decl import HYPERHIVE_SERVER, Tool

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


# ---- what each group grants, checked against the specification -------------------------
#
# Not a second copy of the declarations: the tools the specification names, with the grant
# it gives each (spec 002 "Core tools" and "Privileged tools", spec 001 the bash server,
# spec 004 table B the manager's socket variants, now the lifecycle tools), and one rule for
# every tool it does not name: a tool is granted by the group its module is named for (or,
# in a module named for a server, by that server's grant). A new tool in its group's module
# needs no line here; a tool granted outside its module's group (always on, or by a
# capability) is a line of SPEC, so widening what every agent gets is a visible test change.

Grant = ToolGroup | Capability | None  # None: always on (in no group)

SPEC: dict[tuple[str, str], Grant] = {
    # spec 002, "Core tools": messaging, inbox, meta; compact always on.
    (HYPERHIVE_SERVER, "send"): ToolGroup.MESSAGING,
    (HYPERHIVE_SERVER, "recv"): ToolGroup.MESSAGING,
    (HYPERHIVE_SERVER, "ack_until"): ToolGroup.MESSAGING,
    (HYPERHIVE_SERVER, "get_loose_ends"): ToolGroup.INBOX,
    (HYPERHIVE_SERVER, "cancel_loose_end"): ToolGroup.INBOX,
    (HYPERHIVE_SERVER, "remind"): ToolGroup.INBOX,
    (HYPERHIVE_SERVER, "set_status"): ToolGroup.META,
    (HYPERHIVE_SERVER, "get_agent_meta"): ToolGroup.META,
    # spec 004 section C: a manager reads what was deployed for its descendants.
    (HYPERHIVE_SERVER, "get_deployed"): Capability.META_READ,
    (HYPERHIVE_SERVER, "compact"): None,
    # spec 004 table B (manage and spawn children) and spec 002 "Lifecycle + config".
    (HYPERHIVE_SERVER, "request_init_config"): ToolGroup.LIFECYCLE,
    (HYPERHIVE_SERVER, "kill"): ToolGroup.LIFECYCLE,
    (HYPERHIVE_SERVER, "start"): ToolGroup.LIFECYCLE,
    (HYPERHIVE_SERVER, "restart"): ToolGroup.LIFECYCLE,
    (HYPERHIVE_SERVER, "update"): ToolGroup.LIFECYCLE,
    (HYPERHIVE_SERVER, "request_apply_commit"): ToolGroup.APPROVALS,
    # spec 002 "Privileged tools".
    (HYPERHIVE_SERVER, "get_logs"): ToolGroup.DIAGNOSTICS,
    (HYPERHIVE_SERVER, "create_repo"): ToolGroup.FORGE,
    (HYPERHIVE_SERVER, "get_host_journal"): Capability.READ_HOST_JOURNAL,
    # spec 001 and 002: the bash server's run/status/kill, gated by execution.
    (BASH_SERVER, "run"): ToolGroup.EXECUTION,
    (BASH_SERVER, "status"): ToolGroup.EXECUTION,
    (BASH_SERVER, "kill"): ToolGroup.EXECUTION,
}

# A module named for a server rather than a group: the grant the spec gives that server's
# tools (spec 000: the subagent surface is default-on, in no group; spec 002: matrix is
# turned on per agent by its config, not by a group).
SERVER_GRANTS: dict[str, Grant] = {
    BASH_SERVER: ToolGroup.EXECUTION,
    "subagent": None,
    "matrix": None,
}


def grant_of(tool: Tool[Any, Any]) -> Grant:
    return tool.capability if tool.capability is not None else tool.group


def misgranted(by_module: Mapping[str, Sequence[Tool[Any, Any]]]) -> list[str]:
    """Every declaration that contradicts the spec or its module's group, said in words."""
    problems: list[str] = []
    declared = {(t.server, t.name): t for tools in by_module.values() for t in tools}
    for key, want in SPEC.items():
        if key not in declared:
            problems.append(f"{key[0]}.{key[1]} is in the spec but not declared")
        elif grant_of(declared[key]) != want:
            problems.append(
                f"{key[0]}.{key[1]}: granted by {grant_of(declared[key])}, spec: {want}"
            )
    for module, tools in by_module.items():
        if module in {g.value for g in ToolGroup.ALL}:
            expected: Grant = ToolGroup(module)
        elif module in SERVER_GRANTS:
            expected = SERVER_GRANTS[module]
        else:
            problems.append(f"tools/{module}.py is named for neither a tool group nor a server")
            continue
        for tool in tools:
            key = (tool.server, tool.name)
            if key not in SPEC and grant_of(tool) != expected:
                problems.append(
                    f"{tool.server}.{tool.name} in tools/{module}.py is granted by "
                    f"{grant_of(tool)}, not {expected} (or is a line of SPEC)"
                )
    return problems


def test_every_tool_is_granted_as_the_spec_and_its_module_say() -> None:
    assert misgranted(BY_MODULE) == []


def _moved(module: str, name: str, **change: Any) -> dict[str, tuple[Tool[Any, Any], ...]]:
    """The catalog with one declaration changed (a mistake the check must catch)."""
    return {
        m: tuple(
            dataclasses.replace(t, **change) if (m, t.name) == (module, name) else t for t in tools
        )
        for m, tools in BY_MODULE.items()
    }


@pytest.mark.parametrize(
    ("module", "name", "change", "said"),
    [
        (
            "lifecycle",
            "kill",
            {"group": ToolGroup.MESSAGING},
            "hyperhive.kill: granted by messaging",
        ),
        ("lifecycle", "destroy", {"group": ToolGroup.META}, "hyperhive.destroy in tools/lifecycle"),
        ("messaging", "ask_operator", {"group": None}, "hyperhive.ask_operator in tools/messaging"),
        (
            "scheduling",
            "list_schedules",
            {"group": None, "capability": Capability.QUERY_AGENT_STATE},
            "list_schedules",
        ),
        ("meta", "compact", {"group": ToolGroup.META}, "hyperhive.compact: granted by meta"),
        ("subagent", "start", {"group": ToolGroup.LIFECYCLE}, "subagent.start in tools/subagent"),
    ],
)
def test_the_check_catches_a_tool_granted_to_the_wrong_group(
    module: str, name: str, change: dict[str, Any], said: str
) -> None:
    problems = misgranted(_moved(module, name, **change))
    assert len(problems) == 1 and said in problems[0], problems


def test_the_check_refuses_a_module_named_for_nothing_it_knows() -> None:
    stray = {**BY_MODULE, "misc": BY_MODULE["meta"]}
    assert any("tools/misc.py" in p for p in misgranted(stray))


def test_capabilities_unlock_what_the_spec_says() -> None:
    journal = capability_tools(Capability.READ_HOST_JOURNAL)
    assert [t.qualified for t in journal] == ["mcp__hyperhive__get_host_journal"]
    # spec 002: query_agent_state widens get_loose_ends(agent=…), it grants no tool.
    assert capability_tools(Capability.QUERY_AGENT_STATE) == ()


def test_the_default_presets_hold_no_opt_in_group() -> None:
    # spec 002: lifecycle, approvals, scheduling, diagnostics are opt-in (the manager
    # preset adds them); forge is in no default preset; web_tools is off by default.
    opt_in = {ToolGroup.LIFECYCLE, ToolGroup.APPROVALS, ToolGroup.SCHEDULING, ToolGroup.DIAGNOSTICS}
    assert not opt_in & set(ToolGroup.AGENT_DEFAULT)
    for preset in (ToolGroup.AGENT_DEFAULT, ToolGroup.MANAGER_DEFAULT):
        assert ToolGroup.FORGE not in preset and ToolGroup.WEB_TOOLS not in preset
    for group in ToolGroup.ALL:  # every group but web_tools grants MCP tools
        assert bool(group_tools(group)) is (group is not ToolGroup.WEB_TOOLS), group


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
