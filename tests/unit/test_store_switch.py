"""The suite's store switch: with ``HH_TEST_STORE`` unset, the suites in
``BOTH_WHEN_UNSET`` (a directory or one module) run on both backends, the rest on SQLite."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from tests.support.store_switch import BOTH_WHEN_UNSET, STORE_SWITCH_ENV, backends_for

TESTS = Path(__file__).resolve().parents[1]


def _at(relative: str) -> pytest.Item:
    return cast(pytest.Item, SimpleNamespace(path=TESTS / relative))


def test_unset_runs_the_named_suites_on_both_and_the_rest_on_sqlite(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(STORE_SWITCH_ENV, raising=False)
    assert "chaos" in BOTH_WHEN_UNSET and "integration/test_placement.py" in BOTH_WHEN_UNSET
    both = ["sqlite", "postgresql"]
    assert backends_for(_at("chaos/test_corrupt_inputs.py")) == both
    assert backends_for(_at("integration/test_placement.py")) == both
    # A module is named whole, not as a prefix of others' names.
    assert backends_for(_at("integration/test_placement_more.py")) == ["sqlite"]
    assert backends_for(_at("chaosx/test_a.py")) == ["sqlite"]
    assert backends_for(_at("e2e/test_up.py")) == ["sqlite"]


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
