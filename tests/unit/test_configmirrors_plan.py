"""Which config repo mirrors a disk keeps: a descendant held elsewhere, for its ancestors here."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hyperhive import topology
from hyperhive.core.fleet.agentdisks import LOCAL
from hyperhive.core.fleet.configmirrors import plan

NAMES = ["a", "b", "c", "d", "e", "f"]


def test_a_child_on_another_disk_is_mirrored_for_its_ancestors_here() -> None:
    topo: dict[str, str | None] = {"root": None, "mgr": "root", "kid": "mgr", "pet": "kid"}
    disks = {"root": "h1", "mgr": "h1", "kid": "h2", "pet": "h2"}
    assert plan(topo, disks, "h1") == {"kid": ["mgr", "root"], "pet": ["mgr", "root"]}
    assert plan(topo, disks, "h2") == {}  # kid's own repo and pet's real one are there
    # Back together: nothing to mirror anywhere.
    together = {**disks, "kid": "h1", "pet": "h1"}
    assert plan(topo, together, "h1") == plan(topo, together, "h2") == {}


def test_only_the_ancestors_on_the_disk_write_and_unplaced_agents_are_local() -> None:
    topo: dict[str, str | None] = {"g": None, "p": "g", "k": "p"}
    # p is on h2 beside nothing of its own; g is local (never placed: the local disk).
    assert plan(topo, {"p": "h2", "k": "h3"}, LOCAL) == {"k": ["g"], "p": ["g"]}
    assert plan(topo, {"p": "h2", "k": "h3"}, "h2") == {"k": ["p"]}
    # A root agent is nobody's descendant: never mirrored.
    assert "g" not in plan(topo, {"g": "h9"}, LOCAL)


@given(
    parents=st.dictionaries(st.sampled_from(NAMES), st.none() | st.sampled_from(NAMES)),
    disk_of=st.dictionaries(st.sampled_from(NAMES), st.sampled_from(["h1", "h2", LOCAL])),
    disk=st.sampled_from(["h1", "h2", LOCAL]),
)
def test_a_mirror_is_exactly_an_agent_elsewhere_with_an_ancestor_here(
    parents: dict[str, str | None], disk_of: dict[str, str], disk: str
) -> None:
    # Cycles and self-parents are possible here: the walks are guarded.
    planned = plan(parents, disk_of, disk)
    for agent in parents:
        here = [a for a in topology.ancestors(parents, agent) if disk_of.get(a, LOCAL) == disk]
        if disk_of.get(agent, LOCAL) == disk or not here:
            assert agent not in planned
        else:
            assert planned[agent] == here
    assert set(planned) <= set(parents)
