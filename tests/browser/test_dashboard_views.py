"""The dashboard's pure view helpers (no browser, no I/O)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperhive.config import AgentConfig, McpServer
from hyperhive.core.api.dashboard.views import (
    compact_rule,
    perms_preview,
    thread_messages,
    tree_rows,
)
from hyperhive.errors import InvalidRequest
from hyperhive.permissions import ToolGroup, builtin_tools_arg


def agent(name: str, parent: str | None) -> dict[str, Any]:
    return {"name": name, "parent": parent}


def test_tree_rows_roots_first_depth_first_sorted() -> None:
    rows = tree_rows(
        [agent("c", "a"), agent("a", None), agent("b", None), agent("d", "c"), agent("e", "a")]
    )
    assert [(r.agent["name"], r.depth) for r in rows] == [
        ("a", 0),
        ("c", 1),
        ("d", 2),
        ("e", 1),
        ("b", 0),
    ]


def test_tree_rows_treats_a_missing_parent_as_root() -> None:
    assert [r.depth for r in tree_rows([agent("x", "gone")])] == [0]


names = st.sampled_from(["a", "b", "c", "d", "e", "f"])


@given(st.dictionaries(names, st.one_of(st.none(), names)))
def test_tree_rows_lists_every_agent_once_even_with_cycles(topo: dict[str, str | None]) -> None:
    rows = tree_rows([agent(n, p) for n, p in topo.items()])
    assert sorted(r.agent["name"] for r in rows) == sorted(topo)


def msg(mid: int, reply_to: int | None, at: float) -> dict[str, Any]:
    return {"id": mid, "in_reply_to": reply_to, "created_at": at, "from": "x", "body": ""}


def test_thread_messages_nests_replies_and_orders_by_activity() -> None:
    threads = thread_messages(
        [msg(1, None, 1), msg(2, 1, 2), msg(3, None, 3), msg(4, 2, 4), msg(5, 99, 0.5)]
    )
    assert [[(d, m["id"]) for d, m in t.messages] for t in threads] == [
        [(0, 1), (1, 2), (2, 4)],
        [(0, 3)],
        [(0, 5)],
    ]


def test_perms_preview_matches_permissions_and_refuses_in_words() -> None:
    cfg = AgentConfig(mcp_servers={"x": McpServer(command="x", allowed_tools=["*"])})
    got = perms_preview(["messaging", " WEB_TOOLS "], ["read_host_journal"], cfg)
    assert got["tools_arg"] == builtin_tools_arg([ToolGroup.MESSAGING, ToolGroup.WEB_TOOLS])
    assert "mcp__x__*" in got["allowed_tools_arg"]
    assert "get_host_journal" in got["allowed_tools_arg"]
    # bash comes with execution only, exactly as the agent's turns get it.
    assert "mcp__bash__" not in got["allowed_tools_arg"]
    assert "mcp__bash__run" in perms_preview(["execution"], [], cfg)["allowed_tools_arg"]
    with pytest.raises(InvalidRequest, match="known groups"):
        perms_preview(["nope"])
    with pytest.raises(InvalidRequest, match="at least one tool group"):
        perms_preview(["", " "])


def test_compact_rule_in_words() -> None:
    assert compact_rule(None, 0.66).endswith("no turn recorded yet")
    assert compact_rule(0.1, 0.66).startswith("yours runs at any usage")
    assert "used 80% (its own: allowed now)" in compact_rule(0.8, 0.66)
    assert "used 66% (its own: not yet)" in compact_rule(0.66, 0.66)
