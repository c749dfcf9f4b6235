"""One declaration per tool: everything that lists, serves, grants or gates a tool reads it.

For every declared tool: its surface serves it (with a handler) and lists it
for exactly the agents its group or capability admits; the permissions table
grants it under that group; the coordinator's gate refuses it without that
group or capability; and, for a ``hyperhive`` tool, the request it becomes is
spoken on the agent socket and handled there. Nothing is served, granted or
spoken as a tool without a declaration.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hyperhive.agent.events import EventsBus
from hyperhive.agent.host import AgentHost
from hyperhive.agent.mcp_surface import Surface
from hyperhive.config import AgentConfig, HiveConfig, HivePaths
from hyperhive.core.api.agent_api import AGENT_TABLE, gate
from hyperhive.dispatch import union_members
from hyperhive.errors import PermissionDenied, ToolGroupDenied
from hyperhive.matrix.config import AgentMatrixConfig
from hyperhive.permissions import (
    ALWAYS_ON_TOOLS,
    GROUP_GATED_SERVERS,
    HYPERHIVE_SERVER,
    Capability,
    ToolGroup,
    capability_tools,
    granted_mcp_tools,
    group_tools,
)
from hyperhive.protocol import AgentRequest
from hyperhive.tools import meta, subagent
from hyperhive.tools.catalog import BY_MODULE, CATALOG, CatalogError, check, declared_in, served_by
from hyperhive.tools.decl import Tool
from hyperhive.tools.meta import SetStatusReq, StatusArgs

HOST = AgentHost(HivePaths(Path("/nonexistent/hyperhive-home")), HiveConfig(runtime="unsandboxed"))


@dataclass
class _Agent:
    """A SurfaceAgent with exactly the given grants."""

    groups: tuple[ToolGroup, ...]
    capabilities: tuple[Capability, ...] = ()
    name: str = "alice"
    bus: EventsBus = field(default_factory=EventsBus)
    # [matrix] on: the matrix surface is gated by it, not by groups (tested in test_tools_offered).
    config: AgentConfig = field(
        default_factory=lambda: AgentConfig(matrix=AgentMatrixConfig(enabled=True))
    )


def _ids(tool: Tool[Any, Any]) -> str:
    return f"{tool.server}.{tool.name}"


@pytest.mark.parametrize("tool", CATALOG, ids=_ids)
def test_every_declared_tool_is_served_by_its_surface(tool: Tool[Any, Any]) -> None:
    surface = HOST.surfaces[tool.server]
    assert surface.tools[tool.name] is tool
    assert tool.name in surface.handlers
    assert surface.describe(tool.name).input_schema["type"] == "object"


def test_no_surface_serves_a_tool_without_a_declaration() -> None:
    for server, surface in HOST.surfaces.items():
        assert list(surface.tools.values()) == list(served_by(server)), server
        assert set(surface.handlers) == set(surface.tools), server


@pytest.mark.parametrize("tool", CATALOG, ids=_ids)
def test_every_gated_tool_is_listed_by_its_group_or_capability(tool: Tool[Any, Any]) -> None:
    if tool.server not in GROUP_GATED_SERVERS:
        assert tool.group is None and tool.capability is None
        return
    if tool.group is not None:
        assert tool.mcp in group_tools(tool.group)
        assert [g for g in ToolGroup.ALL if tool.mcp in group_tools(g)] == [tool.group]
    elif tool.capability is not None:
        assert tool.mcp in capability_tools(tool.capability)
    else:
        assert tool.mcp in ALWAYS_ON_TOOLS
    everything = granted_mcp_tools(ToolGroup.ALL, list(Capability))
    assert tool.mcp in everything


@pytest.mark.parametrize("tool", CATALOG, ids=_ids)
def test_the_surface_lists_a_tool_exactly_for_the_agents_it_admits(tool: Tool[Any, Any]) -> None:
    surface = HOST.surfaces[tool.server]
    assert tool.name in surface.listed_for(_Agent(ToolGroup.ALL, tuple(Capability)))
    if tool.group is not None:
        others = tuple(g for g in ToolGroup.ALL if g is not tool.group)
        assert tool.name not in surface.listed_for(_Agent(others, tuple(Capability)))
    if tool.capability is not None:
        others_caps = tuple(c for c in Capability if c is not tool.capability)
        assert tool.name not in surface.listed_for(_Agent(ToolGroup.ALL, others_caps))
    if tool.group is None and tool.capability is None:
        assert tool.name in surface.listed_for(_Agent(()))


def _config(groups: list[ToolGroup], caps: list[Capability]) -> AgentConfig:
    return AgentConfig(tool_groups=groups, capabilities=caps)


@pytest.mark.parametrize("tool", served_by(HYPERHIVE_SERVER), ids=_ids)
def test_the_coordinator_gates_every_hyperhive_tool_by_its_declaration(
    tool: Tool[Any, Any],
) -> None:
    gate(tool.name, "alice", _config(list(ToolGroup.ALL), list(Capability)))
    if tool.group is not None:
        without = [g for g in ToolGroup.ALL if g is not tool.group]
        with pytest.raises(ToolGroupDenied, match=f"needs the '{tool.group.value}' tool group"):
            gate(tool.name, "alice", _config(without, list(Capability)))
    if tool.capability is not None:
        without_cap = [c for c in Capability if c is not tool.capability]
        with pytest.raises(PermissionDenied, match=f"{tool.capability.value} capability"):
            gate(tool.name, "alice", _config(list(ToolGroup.ALL), without_cap))


def test_a_forwarded_tool_is_spoken_and_handled_on_the_agent_socket() -> None:
    members = union_members(AgentRequest)
    cmds = {
        cmd: member
        for member in members
        for cmd in typing.get_args(member.model_fields["cmd"].annotation)
    }
    for tool in served_by(HYPERHIVE_SERVER):
        if tool.wire is None:
            continue  # runs on the host (create_repo)
        assert cmds[tool.name] is tool.wire
        assert tool.wire in AGENT_TABLE.members
    # … and every agent-socket command that shares a tool's name is that tool's request.
    for cmd, member in cmds.items():
        declared = next((t for t in served_by(HYPERHIVE_SERVER) if t.name == cmd), None)
        if declared is not None:
            assert declared.wire is member


def test_a_declared_request_carries_the_arguments_the_model_gave() -> None:
    tool = next(t for t in CATALOG if t.name == "set_status")
    req = tool.request(StatusArgs(text="compiling"))
    assert isinstance(req, SetStatusReq) and (req.cmd, req.text) == ("set_status", "compiling")
    cancel = next(t for t in CATALOG if t.name == "cancel_loose_end")
    wire = cancel.request(cancel.args(kind="todo", id=7))
    assert wire.model_dump(exclude={"id", "traceparent"}) == {  # the envelope aside
        "cmd": "cancel_loose_end",
        "kind": "todo",
        "row_id": 7,
    }


def test_the_catalog_refuses_a_second_declaration_or_a_wire_that_does_not_admit_it() -> None:
    send = next(t for t in served_by(HYPERHIVE_SERVER) if t.name == "send")
    with pytest.raises(CatalogError, match="declared twice"):
        check((send, send))
    renamed = Tool(
        HYPERHIVE_SERVER, "shout", "x", send.args, "x", wire=send.wire, render=send.render
    )
    with pytest.raises(CatalogError, match="does not admit 'shout'"):
        check((renamed,))
    unrendered = Tool(HYPERHIVE_SERVER, "send", "x", send.args, "x", wire=send.wire)
    with pytest.raises(CatalogError, match="needs a render"):
        check((unrendered,))


def test_the_catalog_finds_every_declaration_module_by_itself() -> None:
    # A module is registered by being written: its TOOLS, then its other *_TOOLS.
    assert BY_MODULE["meta"] == meta.TOOLS
    assert BY_MODULE["subagent"] == subagent.TOOLS + subagent.CONTROL_TOOLS
    assert CATALOG == tuple(t for tools in BY_MODULE.values() for t in tools)
    names = list(BY_MODULE)
    assert names[:2] == ["messaging", "meta"]  # group modules in ToolGroup order
    assert {"catalog", "decl", "doc", "groups"}.isdisjoint(names)


def test_a_module_in_the_tools_package_that_declares_nothing_is_refused() -> None:
    stray = types.ModuleType("hyperhive.tools.helpers")
    stray.__all__ = ["helper"]  # type: ignore[attr-defined]
    with pytest.raises(CatalogError, match="helpers exports no TOOLS"):
        declared_in(stray)
    wrong = types.ModuleType("hyperhive.tools.odd")
    wrong.__all__ = ["TOOLS"]  # type: ignore[attr-defined]
    wrong.TOOLS = ["send"]  # type: ignore[attr-defined]
    with pytest.raises(CatalogError, match="odd.TOOLS is not a tuple of Tool"):
        declared_in(wrong)


def test_a_surface_refuses_a_declared_tool_it_has_no_handler_for() -> None:
    with pytest.raises(ValueError, match=r"no handler \['run'\]"):
        Surface("bash", served_by("bash")[:1], {}, lambda name: None)
    with pytest.raises(ValueError, match=r"no declaration \['ghost'\]"):
        Surface("bash", (), {"ghost": HOST.surfaces["bash"].handlers["run"]}, lambda name: None)
