"""Which tests reach the store beyond a hive's start: the set CI runs again on PostgreSQL.

CI runs the suite once on SQLite. The tests whose hives do more with the store than
start (send, ack, remind, approve, place, move…) run a second time on PostgreSQL.
That set is measured, never listed by hand:

1. **Record** (``HH_STORE_REACH_RECORD=DIR`` on the SQLite pass): coverage.py measures
   ``src/hyperhive/store/sqlite/`` — the code that has a PostgreSQL twin — in the
   test processes and in every Python process they start (``hivectl serve``, ``up``,
   hosts: coverage's ``.pth`` hook, ``COVERAGE_PROCESS_START``), each line labelled
   with the test that ran it (a dynamic context in the test process, a static one,
   from ``HH_STORE_REACH_TEST``, in the processes it starts). Only tests the store
   switch may move (``store_switch``) are labelled: the others name their store.
2. **Select** (``python -m tests.support.store_reach DIR``): the tests that ran a
   function of that code (a store operation: ``messages.py:SqliteMessages.ack``) which
   :data:`BASELINE` — a hive that only starts its agents and stops — did not run.
   Written to ``DIR/selected``, one node id a line.
3. **Run** (``HH_TEST_STORE=postgres HH_STORE_REACH_SELECT=DIR/selected``): only those.

A process killed by ``kill -9`` writes no coverage data; its test still counts by
whatever its other processes ran. Measuring one directory keeps the tracer cheap.
"""

from __future__ import annotations

import ast
import json
import os
import resource
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import coverage
import pytest

__all__ = [
    "BASELINE",
    "RECORD_ENV",
    "SELECT_ENV",
    "TEST_ENV",
    "beyond_start",
    "functions_by_line",
    "select",
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
# Every warning coverage.py could print into a measured process's stderr (a CLI's output
# is asserted on; a test process turns warnings into errors).
_QUIET = (
    "already-imported, couldnt-parse, dynamic-conflict, include-ignored, "
    "module-not-imported, module-not-measured, module-not-python, no-ctracer, "
    "no-data-collected, no-source, no-sysmon, no-sysmon-context, source-glob-no-match, "
    "trace-changed, fork, pth, cant-combine"
)


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


def functions_by_line(source: str) -> dict[int, str]:
    """Body line → the qualified name of the innermost function holding it. Other lines
    (imports, class bodies, def lines) run when code is loaded, not when it is called."""
    out: dict[int, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                # The body only: a def's own line (and its decorators) runs when the
                # module or the enclosing function is loaded, not when it is called.
                for line in range(child.body[0].lineno, (child.end_lineno or child.lineno) + 1):
                    out[line] = name  # inner functions, visited later, overwrite
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return out


# --- recording ---------------------------------------------------------------------------


def _config(record: Path) -> Path:
    """The coverage configuration every measured process reads (``COVERAGE_PROCESS_START``)."""
    data = record / "data"
    data.mkdir(parents=True, exist_ok=True)
    # Processes run as other users (a serve as a non-root user) write their data too.
    for path in (record, data):
        path.chmod(0o1777 if path == data else 0o755)
    rc = record / "coveragerc"
    rc.write_text(
        "[run]\n"
        f"source = {MEASURED}\n"
        "parallel = true\n"
        f"data_file = {data / 'cov'}\n"
        f"context = ${{{TEST_ENV}}}\n"
        f"disable_warnings = {_QUIET}\n"
    )
    rc.chmod(0o644)
    return rc


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
        # Before xdist starts its workers: they, and every process a test starts, inherit it.
        os.environ["COVERAGE_PROCESS_START"] = str(_config(record))
    if _runs_tests(config) and coverage.Coverage.current() is None:
        coverage.process_startup(force=True)
    cov = coverage.Coverage.current()
    if _runs_tests(config) and cov is not None:
        config.stash[_COV] = cov
        config.stash[_COSTS] = (record / "costs").joinpath(f"{os.getpid()}.jsonl")
        config.stash[_COSTS].parent.mkdir(exist_ok=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    cov = config.stash.get(_COV, None)
    if cov is not None:
        cov.stop()
        cov.save()


_COV = pytest.StashKey[coverage.Coverage]()
_COSTS = pytest.StashKey[Path]()


def _labelled(item: pytest.Item) -> bool:
    from tests.support.store_switch import switchable_on_sqlite

    return switchable_on_sqlite(item)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    cov = item.config.stash.get(_COV, None)
    if cov is None or not _labelled(item):
        return (yield)
    os.environ[TEST_ENV] = item.nodeid
    cov.switch_context(item.nodeid)
    cpu, children = time.process_time(), _children_cpu()
    try:
        return (yield)
    finally:
        cov.switch_context("")
        os.environ.pop(TEST_ENV, None)
        cost = {
            "test": item.nodeid,
            "cpu": round(time.process_time() - cpu, 3),
            "children": round(_children_cpu() - children, 3),
        }
        with item.config.stash[_COSTS].open("a") as out:
            out.write(json.dumps(cost) + "\n")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# --- running the selection ---------------------------------------------------------------


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    raw = os.environ.get(SELECT_ENV)
    if not raw:
        return
    wanted = set(Path(raw).read_text().split())
    # A selected test this run did not collect (renamed, parametrized differently) would
    # leave an operation off PostgreSQL unseen: say so instead.
    if missing := sorted(wanted - {i.nodeid for i in items}):
        raise pytest.UsageError(
            f"{SELECT_ENV}={raw} names {len(missing)} test(s) this run did not collect, "
            f"e.g. {missing[0]}: collect the modules it lists, or record the selection again"
        )
    keep = [i for i in items if i.nodeid in wanted]
    dropped = [i for i in items if i.nodeid not in wanted]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_report_header(config: pytest.Config) -> str | None:
    if raw := os.environ.get(SELECT_ENV):
        count = len(Path(raw).read_text().split())
        return f"store reach: the {count} tests {raw} lists (reaching the store beyond start)"
    if raw := os.environ.get(RECORD_ENV):
        return f"store reach: recording which tests run {MEASURED} beyond a hive's start"
    return None


# --- selecting ---------------------------------------------------------------------------


def _functions_by_test(record: Path) -> dict[str, frozenset[str]]:
    """Test → the store functions (``module.py:Class.method``) it ran. A function, not a
    line: the PostgreSQL twin of a SQLite method has lines of its own, so what carries
    over from one backend to the other is which operations a test asked for."""
    data_dir = record / "data"
    if not any(data_dir.glob("cov.*")):
        raise ValueError(f"no coverage data under {data_dir}: was the SQLite pass recorded?")
    # Combined into data/cov (combining reads the files named like it: cov.*).
    cov = coverage.Coverage(data_file=str(data_dir / "cov"), config_file=str(record / "coveragerc"))
    cov.combine([str(data_dir)], keep=True)
    data = cov.get_data()
    ran: dict[str, set[str]] = {}
    for path in data.measured_files():
        name = Path(path).relative_to(MEASURED).as_posix()
        functions = functions_by_line(Path(path).read_text())
        for lineno, contexts in data.contexts_by_lineno(path).items():
            if (function := functions.get(lineno)) is None:
                continue
            for context in contexts:
                # A process a test started labels its lines "test" (a static context);
                # the test process itself, "|test" or "test" (a dynamic one).
                if test := context.strip("|"):
                    ran.setdefault(test, set()).add(f"{name}:{function}")
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
DEFAULT_BUDGET = 240.0


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
