"""The suite's store switch: with ``HH_TEST_STORE`` unset every switchable hive runs on
SQLite (the PostgreSQL pass is measured: ``tests/support/store_reach.py``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from tests.support.store_switch import STORE_SWITCH_ENV, backends_for

TESTS = Path(__file__).resolve().parents[1]


def _at(relative: str) -> pytest.Item:
    return cast(pytest.Item, SimpleNamespace(path=TESTS / relative))


def test_unset_runs_every_switchable_suite_on_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STORE_SWITCH_ENV, raising=False)
    for suite in ("chaos/test_soak.py", "integration/test_placement.py", "e2e/test_up.py"):
        assert backends_for(_at(suite)) == ["sqlite"], suite


@pytest.mark.parametrize(
    ("value", "expected"),
    [("postgres", ["postgresql"]), ("sqlite", ["sqlite"]), ("both", ["sqlite", "postgresql"])],
)
def test_a_set_switch_decides_for_every_suite(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: list[str]
) -> None:
    monkeypatch.setenv(STORE_SWITCH_ENV, value)
    assert backends_for(_at("e2e/test_up.py")) == expected
    assert backends_for(_at("chaos/test_soak.py")) == expected


def test_an_unknown_switch_value_is_refused_with_the_choices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(STORE_SWITCH_ENV, "mysql")
    with pytest.raises(pytest.UsageError, match="expected sqlite, postgres or both"):
        backends_for(_at("e2e/test_up.py"))
