"""Topology and meta log contract: round trips, ordering, survival across reopen."""

from __future__ import annotations

import pytest

from hyperhive.store import Store
from tests.support.stores import Backend

pytestmark = pytest.mark.anyio


async def test_topology_round_trips_and_is_logged(store: Store) -> None:
    assert await store.topology.get() == {}
    tree = {"queen": None, "bob": "queen", "carol": "bob"}
    entry = await store.topology.set(tree, "spawn carol under bob")
    assert entry.action == "topology" and entry.message == "spawn carol under bob"
    assert dict(entry.topology or {}) == tree
    assert await store.topology.get() == tree
    await store.topology.set({"queen": None}, "remove bob and carol")
    assert await store.topology.get() == {"queen": None}
    [newest, oldest] = await store.meta.log()
    assert (newest.seq > oldest.seq, dict(oldest.topology or {})) == (True, tree)


async def test_applied_configs_and_the_deploy_log(store: Store) -> None:
    first = await store.meta.apply_config("bob", 'model = "a"\n', "init bob", action="init")
    second = await store.meta.apply_config("bob", 'model = "b"\n', "apply bob abc123")
    await store.meta.apply_config("carol", "x = 1\n", "init carol", action="init")
    note = await store.meta.note("inputs", None, "claude-code 2.0.1")
    assert await store.meta.configs() == {"bob": 'model = "b"\n', "carol": "x = 1\n"}
    assert first.seq < second.seq < note.seq
    log = await store.meta.log()
    assert [e.message for e in log] == [
        "claude-code 2.0.1",
        "init carol",
        "apply bob abc123",
        "init bob",
    ]
    assert log[2].config == 'model = "b"\n' and log[2].action == "apply"
    bob = await store.meta.log(agent="bob", limit=1)
    assert [e.message for e in bob] == ["apply bob abc123"]

    removed = await store.meta.remove_config("bob", "destroy bob")
    assert (removed.action, removed.agent, removed.config) == ("remove", "bob", None)
    assert await store.meta.configs() == {"carol": "x = 1\n"}
    assert [e.action for e in await store.meta.log(limit=2)] == ["remove", "inputs"]


async def test_topology_and_configs_survive_a_reopen(backend: Backend) -> None:
    store = await backend.open()
    await store.topology.set({"queen": None, "bob": "queen"}, "tree")
    await store.meta.apply_config("bob", "a = 1\n", "init bob")
    await store.close()
    store = await backend.open()
    try:
        assert await store.topology.get() == {"queen": None, "bob": "queen"}
        assert await store.meta.configs() == {"bob": "a = 1\n"}
        assert [e.message for e in await store.meta.log()] == ["init bob", "tree"]
    finally:
        await store.close()


async def test_since_hands_out_the_log_oldest_first_from_a_seq(store: Store) -> None:
    first = await store.meta.apply_config("bob", "a = 1\n", "init bob", action="init")
    tree = await store.topology.set({"bob": None}, "tree")
    inputs = await store.meta.note("inputs", None, "claude-code 2", text='claude_code = "2"\n')
    assert [e.seq for e in await store.meta.since(0)] == [first.seq, tree.seq, inputs.seq]
    assert [e.message for e in await store.meta.since(first.seq)] == ["tree", "claude-code 2"]
    assert [e.seq for e in await store.meta.since(first.seq, limit=1)] == [tree.seq]
    assert await store.meta.since(inputs.seq) == []
    assert (inputs.action, inputs.config) == ("inputs", 'claude_code = "2"\n')
    assert await store.meta.configs() == {"bob": "a = 1\n"}  # a note applies no config


async def test_adopt_takes_an_older_homes_files_once(store: Store) -> None:
    configs = {"queen": "x = 1\n", "bob": "broken = [\n"}  # kept as text, broken or not
    tree = {"queen": None, "bob": "queen"}
    entries = await store.meta.adopt(configs, tree, "adopt /h/meta")
    assert [(e.action, e.agent) for e in entries] == [
        ("import", "bob"),
        ("import", "queen"),
        ("topology", None),
    ]
    assert await store.meta.configs() == configs
    assert await store.topology.get() == tree
    # Once: the log now has entries, so the store is the truth and files are ignored.
    assert await store.meta.adopt({"eve": "y = 2\n"}, {"eve": None}, "again") == []
    assert await store.meta.configs() == configs
    assert await store.topology.get() == tree
    assert len(await store.meta.log()) == 3


async def test_adopt_into_a_store_with_a_log_changes_nothing(store: Store) -> None:
    await store.meta.note("inputs", None, "anything")
    assert await store.meta.adopt({"bob": "a = 1\n"}, None, "adopt") == []
    assert await store.meta.configs() == {}
    assert await store.topology.get() == {}
