"""The PostgreSQL pass's selection: the tests that ran store operations a hive's start
did not."""

from __future__ import annotations

import pytest

from tests.support.store_reach import beyond_start, functions_by_line

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


def test_each_line_belongs_to_its_innermost_function_and_module_code_to_none() -> None:
    lines = functions_by_line(SOURCE)
    assert [lines.get(n) for n in range(1, 17)] == [
        None,  # docstring
        None,  # import
        None,
        None,
        None,  # class line
        None,  # class attribute
        None,
        "Messages.send",  # its decorator
        "Messages.send",
        "Messages.send.encode",
        "Messages.send.encode",
        "Messages.send",
        None,
        None,
        "sweep",
        "sweep",
    ]
