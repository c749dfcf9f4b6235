"""The PostgreSQL pass's selection: the tests that ran store code a hive's start did not."""

from __future__ import annotations

import pytest

from tests.support.store_reach import beyond_start

START = frozenset({("engine.py", 10), ("engine.py", 11), ("agents.py", 5)})


def test_a_test_that_only_starts_a_hive_stays_on_sqlite_and_one_that_does_more_moves() -> None:
    lines = {
        "base::a": START - {("agents.py", 5)},
        "base::b": frozenset({("agents.py", 5)}),
        "t::starts_only": frozenset({("engine.py", 10)}),
        "t::sends": START | {("messages.py", 40)},
        "t::acks_only": frozenset({("messages.py", 90)}),
    }
    # The baseline is the union of its tests, and is never selected itself.
    assert beyond_start(lines, ["base::a", "base::b"]) == ["t::acks_only", "t::sends"]


def test_a_baseline_that_recorded_nothing_refuses_to_select() -> None:
    lines = {"base::a": START, "t::sends": frozenset({("messages.py", 40)})}
    with pytest.raises(ValueError, match=r"'base::b'\] recorded no line"):
        beyond_start(lines, ["base::a", "base::b"])
    with pytest.raises(ValueError, match="recording is broken"):
        beyond_start({**lines, "base::b": frozenset()}, ["base::a", "base::b"])
