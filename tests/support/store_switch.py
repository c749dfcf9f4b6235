"""One switch for the store of every hive the suite starts: ``HH_TEST_STORE``.

Read here and nowhere else:

- unset (what ``scripts/test``, so CI, runs): the suites that take ``hive_store_url``
  run on both backends, every other hive on SQLite in its home; ``scripts/test`` then
  runs the tests that reach the store beyond a hive's start again with ``postgres``
  (the set is measured on the SQLite run: ``tests/support/store_reach.py``);
- ``sqlite`` / ``postgres``: every hive on that backend;
- ``both``: every test that may start a hive runs twice, ``[sqlite]`` and
  ``[postgresql]``.

A test on PostgreSQL gets ``HIVE_STORE_URL`` (which beats hive.toml) set to a
fresh database of the session's cluster, so every coordinator it starts, in
process (``tests.support.hive.hive_config``) or as ``hivectl serve``/``up``,
runs there. Left alone: tests marked ``@pytest.mark.sqlite_only`` (a corrupt
``hive.db``, a full home disk), tests that name their own database
(``hive_store_url``, ``pg_url``, ``pg_private_cluster``, the store's contract
tests' ``backend``) and the suites that never start a hive (``unit``, ``store``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperhive.config import STORE_URL_ENV
from tests.support.stores import BACKENDS

__all__ = [
    "STORE_SWITCH_ENV",
    "backends_for",
    "hive_store",
    "hive_store_url",
    "switchable_on_sqlite",
    "switched_backends",
]

STORE_SWITCH_ENV = "HH_TEST_STORE"
_MODES: dict[str, list[str]] = {
    "sqlite": ["sqlite"],
    "postgres": ["postgresql"],
    "postgresql": ["postgresql"],
    "both": list(BACKENDS),
}
# Fixtures through which a test chooses its store itself.
_OWN_STORE_FIXTURES = frozenset(
    {"hive_store_url", "pg_url", "pg_cluster", "pg_private_cluster", "backend"}
)
# Suites that never start a hive: no database for them (a fresh one costs ~0.1-0.3 s).
_HIVELESS_SUITES = frozenset({"unit", "store"})
_TESTS_ROOT = Path(__file__).resolve().parents[1]


def switched_backends() -> list[str] | None:
    """The backends (``BACKENDS`` keys) ``HH_TEST_STORE`` names; None when it is unset."""
    raw = os.environ.get(STORE_SWITCH_ENV, "").strip().lower()
    if not raw:
        return None
    if raw not in _MODES:
        raise pytest.UsageError(
            f"{STORE_SWITCH_ENV}={raw!r}: expected sqlite, postgres or both (unset: "
            "the parametrized suites on both, the rest on SQLite)"
        )
    return _MODES[raw]


def backends_for(node: pytest.Item) -> list[str]:
    """The backends a (switchable) test's hives run on: what ``HH_TEST_STORE`` names,
    or SQLite with it unset."""
    return switched_backends() or ["sqlite"]


def _switchable(node: pytest.Item, fixturenames: list[str] | tuple[str, ...]) -> bool:
    return not (
        node.get_closest_marker("sqlite_only")
        or _OWN_STORE_FIXTURES & set(fixturenames)
        or node.path.relative_to(_TESTS_ROOT).parts[0] in _HIVELESS_SUITES
    )


def switchable_on_sqlite(node: pytest.Item) -> bool:
    """The switch may move this test's hives, and they run on SQLite this session."""
    fixturenames: list[str] = getattr(node, "fixturenames", [])
    return _switchable(node, fixturenames) and backends_for(node) == ["sqlite"]


def pytest_report_header() -> str:
    backends = switched_backends()
    if backends is None:
        return f"hive store: {STORE_SWITCH_ENV} unset (hive_store_url on both, the rest sqlite)"
    return (
        f"hive store: {STORE_SWITCH_ENV}={os.environ[STORE_SWITCH_ENV]} ({' and '.join(backends)})"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "hive_store" not in metafunc.fixturenames or not _switchable(
        metafunc.definition, metafunc.fixturenames
    ):
        return
    backends = backends_for(metafunc.definition)
    if len(backends) > 1:
        metafunc.parametrize("hive_store", backends, indirect=True)


@pytest.fixture(autouse=True)
def hive_store(request: pytest.FixtureRequest) -> Iterator[str]:
    """The backend this test's hives run on (``sqlite`` or ``postgresql``).

    On PostgreSQL, afterwards no ``hive.db`` may exist under the test's ``tmp_path``:
    one would be a hive that slipped past the switch (an environment built from
    scratch, a ``Coordinator(...)`` without ``open``) onto SQLite.
    """
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    backend: str = getattr(request, "param", None) or backends_for(request.node)[0]
    if backend != "postgresql" or not _switchable(request.node, request.fixturenames):
        # A developer's own HIVE_STORE_URL is no place for a test's hive.
        monkeypatch.delenv(STORE_URL_ENV, raising=False)
        yield "sqlite"
        return
    monkeypatch.setenv(STORE_URL_ENV, request.getfixturevalue("pg_url"))
    # Asked for here, before the test, so it is torn down after this check.
    tmp_path: Path | None = (
        request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    )
    yield backend
    if tmp_path is not None:
        strays = sorted(str(p) for p in tmp_path.rglob("hive.db"))
        if strays:
            pytest.fail(
                f"{STORE_SWITCH_ENV} put this test on PostgreSQL, yet a hive ran on SQLite: "
                f"{', '.join(strays)} (pass the test's environment through, open the "
                "coordinator with Coordinator.open, or mark the test sqlite_only)"
            )


@pytest.fixture(params=switched_backends() or list(BACKENDS))
def hive_store_url(request: pytest.FixtureRequest) -> str | None:
    """The ``store`` a seeded hive uses: ``None`` (SQLite in its home) or a fresh
    PostgreSQL database of the session's cluster. Pass it to ``seed_home``."""
    if request.param == "sqlite":
        return None
    url: str = request.getfixturevalue("pg_url")
    return url
