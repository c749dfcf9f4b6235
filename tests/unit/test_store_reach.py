"""The PostgreSQL pass's selection: the tests that ran store operations a hive's start
did not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import store_reach
from tests.support.store_reach import beyond_start, within_budget

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


PROBED = """
import asyncio, inspect, os, sys
from pathlib import Path
from hyperhive.store import open_store
from hyperhive.store.sqlite.settings import SqliteSettings

async def main() -> None:
    assert inspect.iscoroutinefunction(SqliteSettings.get)  # still awaitable as before
    store = await open_store(Path(sys.argv[1]))
    os.environ["HH_STORE_REACH_TEST"] = "t::keeps"
    await store.settings.keep("k", "v")
    await store.settings.keep("k", "w")  # a second call: no second line
    os.environ["HH_STORE_REACH_TEST"] = "t::reads"
    assert await store.settings.get("k") == "v"
    await store.close()

asyncio.run(main())
"""


def test_the_probe_labels_each_first_store_call_in_a_process_it_starts(tmp_path: Path) -> None:
    """As in a recording run: sitecustomize on PYTHONPATH loads the probe before the store."""
    record = tmp_path / "record"
    (record / "data").mkdir(parents=True)
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(store_reach.__file__).parent / "reach_site"),
        store_reach.RECORD_ENV: str(record),
    }
    env.pop(store_reach.TEST_ENV, None)
    subprocess.run([sys.executable, "-c", PROBED, str(tmp_path)], env=env, check=True)
    ran = store_reach._functions_by_test(record)
    assert {"settings.py:SqliteSettings.keep", "engine.py:Engine.run"} <= ran["t::keeps"]
    assert "settings.py:SqliteSettings.get" in ran["t::reads"]
    assert "settings.py:SqliteSettings.get" not in ran["t::keeps"]
    # Opening the store ran with no test named: not labelled, not recorded.
    assert set(ran) == {"t::keeps", "t::reads"}
    lines = [ln for f in (record / "data").glob("*.tsv") for ln in f.read_text().splitlines()]
    assert lines.count("t::keeps\tsettings.py:SqliteSettings.keep") == 1


def test_no_probe_data_is_an_error_not_an_empty_selection(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    with pytest.raises(ValueError, match="was the SQLite pass recorded"):
        store_reach._functions_by_test(tmp_path)


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


def test_a_selection_keeps_node_ids_with_spaces_whole(tmp_path: Path) -> None:
    ids = [
        "tests/e2e/test_turn_economy.py::test_every_scenario_costs_its_minimum"
        "[bash task ends inline]",
        "tests/integration/test_broker.py::test_send",
    ]
    path = tmp_path / "selected"
    path.write_text("".join(f"{i}\n" for i in ids) + "\n")
    assert store_reach.selected(path) == set(ids)
