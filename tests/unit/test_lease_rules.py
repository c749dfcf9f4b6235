"""The lease rules (``hyperhive.netlink.lease``): pure, so tested exhaustively."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hyperhive.netlink.lease import expired, fenced_agents, heartbeat_seconds, silent

HOSTS = st.sampled_from(["h1", "h2", "h3"])
AGENTS = st.sampled_from(["a", "b", "c", "d"])


def test_a_lease_expires_at_its_time_and_a_local_host_has_none() -> None:
    assert not expired(None, 1e12)
    assert not expired(10.0, 9.99)
    assert expired(10.0, 10.0) and expired(10.0, 11.0)


def test_silence_is_two_missed_heartbeats() -> None:
    assert heartbeat_seconds(15) == 5
    assert not silent(last_heard=100.0, lease_seconds=15, now=110.0)
    assert silent(last_heard=100.0, lease_seconds=15, now=110.01)


@given(
    host=HOSTS,
    reported=st.sets(AGENTS),
    placement=st.dictionaries(AGENTS, HOSTS),
    lost=st.dictionaries(AGENTS, HOSTS),
)
def test_a_returning_host_stops_exactly_what_it_may_not_hold(
    host: str, reported: set[str], placement: dict[str, str], lost: dict[str, str]
) -> None:
    fenced = fenced_agents(host, reported, placement, lost)
    assert fenced == sorted(fenced) and set(fenced) <= reported
    for agent in reported:
        elsewhere = agent in placement and placement[agent] != host
        lost_here = lost.get(agent) == host
        assert (agent in fenced) == (elsewhere or lost_here)


def test_what_the_coordinator_knows_nothing_against_is_kept() -> None:
    # A fresh coordinator (restart, failover): nothing placed, nothing lost.
    assert fenced_agents("h1", ["a", "b"], {}, {}) == []
    assert fenced_agents("h1", ["a"], {"a": "h1"}, {}) == []
    assert fenced_agents("h1", ["a", "b"], {"a": "h2"}, {"b": "h1"}) == ["a", "b"]
