"""hyperhive.topology: refusals, routing, reconcile, its store, and adopting an old file."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperhive.errors import CycleRefused, SelfParent, UnknownChild, UnknownParent
from hyperhive.store.sqlite import SqliteStore
from hyperhive.topology import (
    MAX_DEPTH,
    TopologyStore,
    ancestors,
    apply_set_parent,
    check_room_below,
    check_route,
    children,
    descendants,
    height,
    is_descendant_of,
    may_destroy,
    may_manage,
    may_route,
    places_changed,
    read_topology_file,
    reconcile,
    roots,
)

TREE = {"queen": None, "alice": None, "bob": "alice", "carol": "bob", "dan": "alice", "eve": None}
KNOWN = list(TREE)


def test_walks() -> None:
    assert ancestors(TREE, "carol") == ["bob", "alice"]
    assert ancestors(TREE, "queen") == []
    assert children(TREE, "alice") == ["bob", "dan"]
    assert descendants(TREE, "alice") == ["bob", "dan", "carol"]
    assert roots(TREE) == ["alice", "eve", "queen"]
    assert is_descendant_of(TREE, "carol", "alice")
    assert not is_descendant_of(TREE, "alice", "carol")
    assert not is_descendant_of(TREE, "alice", "alice")


def test_set_parent_moves_and_reports_change() -> None:
    updated, changed = apply_set_parent(TREE, "eve", "dan", KNOWN)
    assert changed and updated["eve"] == "dan"
    assert TREE["eve"] is None  # the input is not mutated
    promoted, changed = apply_set_parent(TREE, "carol", None, KNOWN)
    assert changed and promoted["carol"] is None


def test_setting_the_same_parent_is_a_no_op() -> None:
    updated, changed = apply_set_parent(TREE, "bob", "alice", KNOWN)
    assert not changed and updated == TREE
    _, changed = apply_set_parent(TREE, "queen", None, KNOWN)
    assert not changed


def test_refusals_name_the_problem() -> None:
    with pytest.raises(UnknownChild, match="'zed'"):
        apply_set_parent(TREE, "zed", None, KNOWN)
    with pytest.raises(UnknownParent, match="'alcie'"):
        apply_set_parent(TREE, "bob", "alcie", KNOWN)
    with pytest.raises(SelfParent, match="own parent"):
        apply_set_parent(TREE, "bob", "bob", KNOWN)
    with pytest.raises(CycleRefused, match="cycle"):
        apply_set_parent(TREE, "alice", "carol", KNOWN)


def test_too_deep_a_chain_is_refused_rather_than_guessed() -> None:
    chain: dict[str, str | None] = {"n0": None}
    for i in range(1, MAX_DEPTH + 2):
        chain[f"n{i}"] = f"n{i - 1}"
    chain["x"] = None
    with pytest.raises(CycleRefused, match="levels deep"):
        apply_set_parent(chain, "x", f"n{MAX_DEPTH + 1}", list(chain))
    # The same limit for a brand-new child (request_init_config): one rule, one message.
    with pytest.raises(CycleRefused, match="levels deep"):
        check_room_below(chain, f"n{MAX_DEPTH}")
    check_room_below(chain, f"n{MAX_DEPTH - 1}")


def test_a_moved_subtree_must_fit_below_its_new_parent() -> None:
    # A chain of 20 under "a", and a separate agent "x" with 13 levels below it:
    # x fits under n0 (depth 1 + 13), but not under n19 (depth 20 + 13 > MAX_DEPTH).
    tree: dict[str, str | None] = {"n0": None}
    for i in range(1, 20):
        tree[f"n{i}"] = f"n{i - 1}"
    tree["x"] = None
    tree["x0"] = "x"
    for i in range(1, 13):
        tree[f"x{i}"] = f"x{i - 1}"
    assert height(tree, "x") == 13
    assert height(tree, "x12") == 0
    with pytest.raises(CycleRefused, match="levels deep"):
        apply_set_parent(tree, "x", "n19", list(tree))
    moved, changed = apply_set_parent(tree, "x", "n0", list(tree))
    assert changed
    assert max(len(ancestors(moved, n)) for n in moved) <= MAX_DEPTH


def test_management_rules() -> None:
    assert may_manage(TREE, "alice", "carol")
    assert may_manage(TREE, "bob", "carol")
    assert not may_manage(TREE, "carol", "bob")
    assert not may_manage(TREE, "alice", "alice")
    assert not may_manage(TREE, "alice", "eve")
    assert may_destroy(TREE, "alice", "bob")
    assert not may_destroy(TREE, "bob", "alice")
    assert not may_destroy(TREE, "bob", "bob")


def test_routing_family_rule() -> None:
    assert may_route(TREE, "bob", "alice")  # parent
    assert may_route(TREE, "bob", "dan")  # sibling
    assert may_route(TREE, "bob", "carol")  # descendant
    assert may_route(TREE, "alice", "carol")  # grandchild
    assert may_route(TREE, "bob", "bob")  # self
    assert may_route(TREE, "bob", "operator")
    assert may_route(TREE, "alice", "eve")  # roots are siblings
    assert not may_route(TREE, "carol", "dan")  # aunt
    assert not may_route(TREE, "bob", "eve")
    assert may_route(TREE, "bob", "eve", extra_recipients=["eve"])


def test_routing_allow_list_restricts_but_never_the_parent() -> None:
    assert may_route(TREE, "bob", "operator", allowed_recipients=["operator"])
    assert not may_route(TREE, "bob", "dan", allowed_recipients=["operator"])
    assert may_route(TREE, "bob", "alice", allowed_recipients=["operator"])
    # A root's parent is the operator, reachable even with a list lacking it.
    assert may_route(TREE, "eve", "operator", allowed_recipients=["queen"])
    decision = check_route(TREE, "bob", "dan", allowed_recipients=["operator"])
    assert "allowed_recipients" in decision.rule
    assert "family rule" in check_route(TREE, "carol", "dan").rule


def test_reconcile_defaults_new_agents_to_root_and_keeps_overrides() -> None:
    out = reconcile(
        {"bob": "alice", "gone": None, "pending": "alice"}, ["alice", "bob", "new"], ["pending"]
    )
    assert out == {"bob": "alice", "pending": "alice", "alice": None, "new": None}


@given(
    st.dictionaries(st.sampled_from("abcdefg"), st.none() | st.sampled_from("abcdefg")),
    st.lists(st.sampled_from("abcdefgh")),
    st.lists(st.sampled_from("abcdefgh")),
)
def test_reconcile_is_idempotent(
    topo: dict[str, str | None], agents: list[str], pending: list[str]
) -> None:
    once = reconcile(topo, agents, pending)
    assert reconcile(once, agents, pending) == once
    for agent in agents:
        assert agent in once


NAMES = [f"a{i}" for i in range(8)]


@given(st.lists(st.tuples(st.sampled_from(NAMES), st.none() | st.sampled_from(NAMES)), max_size=60))
def test_no_sequence_of_set_parent_makes_a_cycle(moves: list[tuple[str, str | None]]) -> None:
    topo: dict[str, str | None] = dict.fromkeys(NAMES)
    for child, parent in moves:
        try:
            topo, _ = apply_set_parent(topo, child, parent, NAMES)
        except (CycleRefused, SelfParent):
            continue
        for name in NAMES:
            chain = [name]
            current = topo[name]
            while current is not None:
                assert current not in chain, f"cycle through {chain}"
                chain.append(current)
                current = topo[current]


def test_a_reparent_changes_the_places_of_the_mover_and_both_lines_of_ancestors() -> None:
    # carol (under bob under alice) moves under queen: carol's parent, and the
    # descendants of bob, alice (lost her) and queen (gained her) change; dan, eve do not.
    after, _ = apply_set_parent(TREE, "carol", "queen", KNOWN)
    assert places_changed(TREE, after) == {
        "carol": ("queen", ()),
        "bob": ("alice", ()),
        "alice": (None, ("bob", "dan")),
        "queen": (None, ("carol",)),
    }
    assert places_changed(TREE, TREE) == {}


@given(st.lists(st.tuples(st.sampled_from(NAMES), st.none() | st.sampled_from(NAMES)), max_size=20))
def test_places_changed_lists_exactly_who_differs(moves: list[tuple[str, str | None]]) -> None:
    before: dict[str, str | None] = dict.fromkeys(NAMES)
    after = before
    for child, parent in moves:
        try:
            after, _ = apply_set_parent(after, child, parent, NAMES)
        except (CycleRefused, SelfParent):
            continue
    changed = places_changed(before, after)
    for name in NAMES:
        place = (after[name], tuple(descendants(after, name)))
        if name in changed:
            assert changed[name] == place
        else:
            assert place == (before[name], tuple(descendants(before, name)))


def test_a_hand_written_cycle_still_answers_in_bounded_time() -> None:
    cyclic = {"a": "b", "b": "c", "c": "a", "d": "a"}
    assert ancestors(cyclic, "d") == ["a", "b", "c"]
    assert set(descendants(cyclic, "a")) == {"b", "c", "d"}
    assert not may_route(cyclic, "d", "zz")
    assert is_descendant_of(cyclic, "d", "c")


@pytest.mark.anyio
async def test_store_roundtrip_and_noop_writes_no_entry(tmp_path: Path) -> None:
    db = await SqliteStore.open(tmp_path / "hive.db")
    try:
        store = TopologyStore(db.topology)
        assert await store.load() == {}
        assert await store.write({"b": "a", "a": None}, "first") is not None
        assert await db.topology.get() == {"a": None, "b": "a"}
        assert await store.write({"a": None, "b": "a"}, "same again") is None
        _, changed = await store.set_parent("b", "a", ["a", "b"])
        assert not changed
        assert [e.message for e in await db.meta.log()] == ["first"]
        updated, changed = await store.set_parent("b", None, ["a", "b"])
        assert changed and store.read_cached() == updated == {"a": None, "b": None}
        assert await db.topology.get() == updated
        assert (await db.meta.log())[0].message == "set parent: b to a root"
        # Another coordinator on the same store starts from what is stored.
        assert await TopologyStore(db.topology).load() == updated
    finally:
        await db.close()


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '"x"', ""])
def test_store_degrades_to_empty_on_a_broken_file(
    tmp_path: Path, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "topology.json"
    path.write_text(content)
    with caplog.at_level(logging.WARNING):
        assert read_topology_file(path) == {}
    assert str(path) in caplog.text


def test_store_skips_malformed_entries(tmp_path: Path) -> None:
    path = tmp_path / "topology.json"
    path.write_text(json.dumps({"a": None, "b": 3, "c": "a"}))
    assert read_topology_file(path) == {"a": None, "c": "a"}
