"""The PostgreSQL pass's selection: the tests that ran store operations a hive's start
did not."""

from __future__ import annotations

import pytest

from tests.support.store_reach import beyond_start, functions_by_line, within_budget

START = frozenset({"engine.py:Engine.open", "agents.py:SqliteAgents.all"})


def test_a_test_that_only_starts_a_hive_stays_on_sqlite_and_one_that_does_more_moves() -> None:
    ran = {
        "base::a": frozenset({"engine.py:Engine.open"}),
        "base::b": frozenset({"agents.py:SqliteAgents.all"}),
        "t::starts_only": frozenset({"engine.py:Engine.open"}),
        "t::sends": START | {"messages.py:SqliteMessages.send"},
        "t::acks_only": frozenset({"messages.py:SqliteMessages.ack"}),
    }
    # The baseline is the union of its tests, and is never selected itself.
    assert beyond_start(ran, ["base::a", "base::b"]) == ["t::acks_only", "t::sends"]


def test_a_baseline_that_recorded_nothing_refuses_to_select() -> None:
    ran = {"base::a": START, "t::sends": frozenset({"messages.py:SqliteMessages.send"})}
    with pytest.raises(ValueError, match=r"'base::b'\] recorded no line"):
        beyond_start(ran, ["base::a", "base::b"])
    with pytest.raises(ValueError, match="recording is broken"):
        beyond_start({**ran, "base::b": frozenset()}, ["base::a", "base::b"])


SOURCE = '''\
"""Doc."""
import os


class Messages:
    limit = 3

    @staticmethod
    def send(to):
        def encode(body):
            return body
        return encode(to)


async def sweep():
    return os.sep
'''


def test_each_body_line_belongs_to_its_innermost_function_and_load_time_lines_to_none() -> None:
    lines = functions_by_line(SOURCE)
    assert [lines.get(n) for n in range(1, 17)] == [
        None,  # docstring
        None,  # import
        None,
        None,
        None,  # class line
        None,  # class attribute
        None,
        None,  # a decorator and a def line run as the class is made
        None,
        "Messages.send",  # the inner def line runs when send is called
        "Messages.send.encode",
        "Messages.send",
        None,
        None,
        None,
        "sweep",
    ]


def test_within_budget_covers_every_function_first_then_adds_the_cheapest_that_fit() -> None:
    ran = {
        "t::sends": frozenset({"m:send"}),
        "t::sends_and_acks": frozenset({"m:send", "m:ack"}),
        "t::acks_slowly": frozenset({"m:ack"}),
        "t::reminds": frozenset({"r:remind"}),
        "t::sends_cheaply": frozenset({"m:send"}),
    }
    costs = {
        "t::sends": 5.0,
        "t::sends_and_acks": 4.0,  # two functions for 4 s beats one for 3 s
        "t::acks_slowly": 30.0,
        "t::reminds": 50.0,  # over any budget here, yet the only one that reminds
        "t::sends_cheaply": 1.0,
    }
    # The cover (send, ack, remind) costs 1 + 4 + 50 s, or 4 + 50: the greedy takes the
    # densest first (sends_cheaply: 1 function/s), then sends_and_acks for ack, then reminds.
    cover = ["t::reminds", "t::sends_and_acks", "t::sends_cheaply"]
    assert within_budget(ran, ran, costs, budget=0.0) == cover
    # Beyond the cover, the cheapest of the rest while they fit: sends (5 s) fits 60 s.
    assert within_budget(ran, ran, costs, budget=60.0) == sorted([*cover, "t::sends"])
    assert within_budget(ran, ran, costs, budget=None) == sorted(ran)
    # Candidates limit the pool; an unmeasured test costs a little, not nothing.
    assert within_budget(ran, ["t::acks_slowly", "t::sends"], {}, budget=0.0) == [
        "t::acks_slowly",
        "t::sends",
    ]
