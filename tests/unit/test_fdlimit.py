"""The open-files rule: what a hive of N agents needs, and what to raise."""

from __future__ import annotations

import re
import resource

from hypothesis import given
from hypothesis import strategies as st

from hyperhive.fdlimit import FD_BASE, FDS_PER_AGENT, fd_advice, fds_needed

limits = st.integers(min_value=64, max_value=1 << 21)


def test_a_thousand_agents_need_about_two_thousand_fds() -> None:
    assert fds_needed(1000) == 2000 + FD_BASE
    advice = fd_advice(1000, 1024, 1024)
    assert advice.problem is not None and advice.raise_soft_to is None
    assert "too low for 1000 agent(s)" in advice.problem
    assert "hard limit (RLIMIT_NOFILE) is 1024" in advice.problem
    assert "ulimit -n 5120" in advice.problem and "LimitNOFILE=5120" in advice.problem


def test_a_soft_limit_below_the_need_is_lifted_to_the_hard_one() -> None:
    assert fd_advice(1000, 1024, 65536).raise_soft_to == 65536
    assert fd_advice(1000, 1024, 65536).problem is None
    assert fd_advice(10, 1024, 65536).raise_soft_to is None  # enough already


def test_unlimited_is_enough() -> None:
    inf = resource.RLIM_INFINITY
    advice = fd_advice(1_000_000, inf, inf)
    assert advice.problem is None and advice.raise_soft_to is None


@given(st.integers(min_value=0, max_value=200_000), limits, limits)
def test_the_rule(agents: int, a: int, b: int) -> None:
    soft, hard = min(a, b), max(a, b)
    advice = fd_advice(agents, soft, hard)
    needed = FD_BASE + FDS_PER_AGENT * agents
    assert advice.needed == needed
    assert (advice.problem is not None) == (hard < needed)
    if advice.raise_soft_to is not None:
        assert advice.raise_soft_to == hard > soft and soft < needed
    elif soft < needed:
        assert soft == hard  # nothing left to lift
    if advice.problem is not None:
        match = re.search(r"LimitNOFILE=(\d+)", advice.problem)
        assert match is not None
        suggested = int(match[1])
        assert suggested >= needed and f"ulimit -n {suggested}" in advice.problem
