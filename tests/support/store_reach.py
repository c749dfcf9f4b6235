"""Which tests reach the store beyond a hive's start: the set CI runs again on PostgreSQL.

CI runs the suite once on SQLite. The tests whose hives do more with the store than
start (send, ack, remind, approve, place, move…) run a second time on PostgreSQL.
That set is measured, never listed by hand:

1. **Record** (``HH_STORE_REACH_RECORD=DIR`` on the SQLite pass): the store probe
   (:mod:`tests.support.store_probe`) counts which functions of
   ``src/hyperhive/store/sqlite/`` — the code that has a PostgreSQL twin — each test
   calls, in the test processes and in every Python process they start (``hivectl
   serve``, ``up``, hosts: ``reach_site/sitecustomize.py`` on ``PYTHONPATH``), each
   labelled with the test that ran it (``HH_STORE_REACH_TEST``). Only tests the store
   switch may move (``store_switch``) are labelled: the others name their store.
2. **Select** (``python -m tests.support.store_reach DIR``): the tests that ran a
   function of that code (a store operation: ``messages.py:SqliteMessages.ack``) which
   :data:`BASELINE` — a hive that only starts its agents and stops — did not run.
   Written to ``DIR/selected``, one node id a line.
3. **Run** (``HH_TEST_STORE=postgres HH_STORE_REACH_SELECT=DIR/selected``): only those.

The probe wraps functions rather than tracing lines: coverage.py's tracer, run in every
process of the suite, slowed it past CI's budget on 2 cores. A process killed by
``kill -9`` keeps what it wrote before (one line per first call).
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import sys
import time
import types
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

__all__ = [
    "BASELINE",
    "RECORD_ENV",
    "SELECT_ENV",
    "TEST_ENV",
    "beyond_start",
    "select",
    "selected",
    "within_budget",
]

RECORD_ENV = "HH_STORE_REACH_RECORD"
SELECT_ENV = "HH_STORE_REACH_SELECT"
TEST_ENV = "HH_STORE_REACH_TEST"
# The reference: what a hive's start alone runs of the store (in-process and as processes).
BASELINE: tuple[str, ...] = (
    "tests/integration/test_hive_start.py::test_a_hive_starts_its_agents_and_stops",
    "tests/integration/test_hive_start.py::test_serve_and_host_start_and_stop_as_processes",
)
_REPO = Path(__file__).resolve().parents[2]
MEASURED = _REPO / "src" / "hyperhive" / "store" / "sqlite"
_SITE = Path(__file__).resolve().parent / "reach_site"
_PROBE = Path(__file__).resolve().parent / "store_probe.py"


def beyond_start(ran: Mapping[str, frozenset[str]], baseline: Iterable[str]) -> list[str]:
    """The tests (of ``ran``: test → the store functions it ran) that ran a function no
    baseline test ran."""
    base = list(baseline)
    missing = [b for b in base if not ran.get(b)]
    if missing:
        raise ValueError(
            f"the baseline test(s) {missing} recorded no line of the store: the recording "
            "is broken (or the baseline test was not run), so no selection can be trusted"
        )
    start: frozenset[str] = frozenset().union(*(ran[b] for b in base))
    return sorted(t for t, done in ran.items() if t not in base and not done <= start)


# --- recording ---------------------------------------------------------------------------


def _probe() -> types.ModuleType:
    """The probe as ``reach_site/sitecustomize.py`` loads it (one copy per process)."""
    if (loaded := sys.modules.get("hh_store_probe")) is not None:
        return loaded
    spec = importlib.util.spec_from_file_location("hh_store_probe", _PROBE)
    assert spec is not None and spec.loader is not None
    probe = importlib.util.module_from_spec(spec)
    sys.modules["hh_store_probe"] = probe
    spec.loader.exec_module(probe)
    return probe


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _runs_tests(config: pytest.Config) -> bool:
    """This process runs tests: an xdist worker, or pytest without workers."""
    return _is_worker(config) or not getattr(config.option, "numprocesses", None)


def pytest_configure(config: pytest.Config) -> None:
    raw = os.environ.get(RECORD_ENV)
    if not raw:
        return
    record = Path(raw).resolve()
    if not _is_worker(config):
        # Before xdist starts its workers: they, and every process a test starts, inherit
        # it. Processes a test runs as another user append to the data directory too.
        data = record / "data"
        data.mkdir(parents=True, exist_ok=True)
        data.chmod(0o1777)
        record.chmod(0o755)
        os.environ[RECORD_ENV] = str(record)
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(_SITE), os.environ.get("PYTHONPATH", "")) if p
        )
    if _runs_tests(config):
        _probe().install(str(record))  # a no-op where sitecustomize already did it
        config.stash[_COSTS] = (record / "costs").joinpath(f"{os.getpid()}.jsonl")
        config.stash[_COSTS].parent.mkdir(exist_ok=True)


_COSTS = pytest.StashKey[Path]()


def _labelled(item: pytest.Item) -> bool:
    from tests.support.store_switch import switchable_on_sqlite

    return switchable_on_sqlite(item)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    costs = item.config.stash.get(_COSTS, None)
    if costs is None or not _labelled(item):
        return (yield)
    os.environ[TEST_ENV] = item.nodeid
    cpu, children = time.process_time(), _children_cpu()
    try:
        return (yield)
    finally:
        os.environ.pop(TEST_ENV, None)
        cost = {
            "test": item.nodeid,
            "cpu": round(time.process_time() - cpu, 3),
            "children": round(_children_cpu() - children, 3),
        }
        with costs.open("a") as out:
            out.write(json.dumps(cost) + "\n")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# --- running the selection ---------------------------------------------------------------


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    raw = os.environ.get(SELECT_ENV)
    if not raw:
        return
    wanted = selected(Path(raw))
    # A selected test this run did not collect (renamed, parametrized differently) would
    # leave an operation off PostgreSQL unseen: say so instead. An xdist worker leaves
    # that to the controller (an error raised in a worker only ends it, wordlessly).
    if not _is_worker(config):
        _refuse_missing(raw, wanted, {i.nodeid for i in items})
    keep = [i for i in items if i.nodeid in wanted]
    dropped = [i for i in items if i.nodeid not in wanted]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: object, ids: Sequence[str]) -> None:
    """The controller's check of what a worker collected (after its deselection)."""
    if raw := os.environ.get(SELECT_ENV):
        _refuse_missing(raw, selected(Path(raw)), set(ids))


def selected(path: Path) -> set[str]:
    """The node ids a selection file lists, one a line (an id may hold spaces)."""
    return {line.strip() for line in path.read_text().splitlines() if line.strip()}


def _refuse_missing(raw: str, wanted: set[str], collected: set[str]) -> None:
    if missing := sorted(wanted - collected):
        raise pytest.UsageError(
            f"{SELECT_ENV}={raw} names {len(missing)} test(s) this run did not collect, "
            f"e.g. {missing[0]}: collect the modules it lists, or record the selection again"
        )


def pytest_report_header(config: pytest.Config) -> str | None:
    if raw := os.environ.get(SELECT_ENV):
        count = len(selected(Path(raw)))
        return f"store reach: the {count} tests {raw} lists (reaching the store beyond start)"
    if raw := os.environ.get(RECORD_ENV):
        return f"store reach: recording which tests call {MEASURED} beyond a hive's start"
    return None


# --- selecting ---------------------------------------------------------------------------


def _functions_by_test(record: Path) -> dict[str, frozenset[str]]:
    """Test → the store functions (``module.py:Class.method``) it ran. A function, not a
    line: the PostgreSQL twin of a SQLite method has lines of its own, so what carries
    over from one backend to the other is which operations a test asked for."""
    data_dir = record / "data"
    files = sorted(data_dir.glob("*.tsv"))
    if not files:
        raise ValueError(f"no store probe data under {data_dir}: was the SQLite pass recorded?")
    ran: dict[str, set[str]] = {}
    for path in files:
        for line in path.read_text().splitlines():
            test, _, function = line.partition("\t")
            if test and function:
                ran.setdefault(test, set()).add(function)
    return {t: frozenset(fs) for t, fs in ran.items()}


def _costs(record: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for path in (record / "costs").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            out[row["test"]] = row["cpu"] + row["children"]
    return out


def within_budget(
    ran: Mapping[str, frozenset[str]],
    candidates: Iterable[str],
    costs: Mapping[str, float],
    budget: float | None,
) -> list[str]:
    """Of ``candidates``, first a cheap set that runs every store function any of them
    runs beyond start (greedy: most new functions per CPU-second, then by name), then
    the cheapest of the rest while the total stays within ``budget`` CPU-seconds (all of
    them with no budget). So every operation the suite does runs on PostgreSQL at least
    once, whatever the budget."""
    pool = sorted(candidates)
    if budget is None:
        return pool
    cost = {t: max(costs.get(t, 0.0), 0.1) for t in pool}  # unmeasured: cheap, not free
    left = set().union(*(ran[t] for t in pool)) if pool else set()
    picked: list[str] = []
    while left:
        best = max(
            (t for t in pool if t not in picked and ran[t] & left),
            key=lambda t: (len(ran[t] & left) / cost[t], t),
        )
        picked.append(best)
        left -= ran[best]
    spent = sum(cost[t] for t in picked)
    for t in sorted((t for t in pool if t not in picked), key=lambda t: (cost[t], t)):
        if spent + cost[t] > budget:
            break
        picked.append(t)
        spent += cost[t]
    return sorted(picked)


def select(record: Path, budget: float | None) -> list[str]:
    """Write ``record/selected`` from the recording; print a summary; return it."""
    ran = _functions_by_test(record)
    candidates = beyond_start(ran, BASELINE)
    start = frozenset().union(*(ran[b] for b in BASELINE))
    costs = _costs(record)
    beyond = {t: ran[t] - start for t in candidates}
    chosen = within_budget(beyond, candidates, costs, budget)
    (record / "selected").write_text("".join(f"{t}\n" for t in chosen))
    recorded = sum(costs.values())
    every = sum(costs.get(t, 0.0) for t in candidates)
    picked = sum(costs.get(t, 0.0) for t in chosen)
    functions = len(set().union(*beyond.values())) if beyond else 0
    sys.stderr.write(
        f"store reach: {len(costs)} tests ran with a switchable SQLite hive "
        f"({recorded:.0f} CPU-s in their processes); {len(ran)} reached the store; "
        f"{len(candidates)} beyond a hive's start ({every:.0f} CPU-s), running "
        f"{functions} store functions a start does not; on PostgreSQL: {len(chosen)} "
        f"({picked:.0f} CPU-s on SQLite; budget {budget if budget is not None else 'none'})\n"
    )
    return chosen


BUDGET_ENV = "HH_TEST_PG_BUDGET"
# CPU-seconds (as measured on the SQLite run) for the PostgreSQL pass beyond its cover.
DEFAULT_BUDGET = 60.0


def _budget() -> float | None:
    raw = os.environ.get(BUDGET_ENV, "").strip()
    if raw in ("", "default"):
        return DEFAULT_BUDGET
    if raw == "all":
        return None
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{BUDGET_ENV}={raw!r}: expected CPU-seconds, or 'all'") from None


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.support.store_reach RECORD_DIR")
    try:
        select(Path(sys.argv[1]), _budget())
    except ValueError as exc:
        sys.exit(f"store reach: {exc}")
