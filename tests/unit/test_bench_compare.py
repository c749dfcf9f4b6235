"""bench.compare reads the ratios bench.run prints, and flags a row over 5% worse."""

from __future__ import annotations

from pathlib import Path

from bench.compare import medians, ratios_of, report
from bench.registry import Latency, Row, Sizes, Throughput
from bench.report import Failure, Machine, render_markdown


def _table(p50_ms: float, sends: int) -> str:
    rows = [
        Row(
            "send | recv (1 in flight)",
            Latency.of([int(p50_ms * 1e6), int(2 * p50_ms * 1e6)]),
            "echo",
            Latency.of([1_000_000, 1_000_000]),
        ),
        Row("sends/s", Throughput(sends, 1_000_000_000), "floor", Throughput(1000, 1_000_000_000)),
        Row("sends/s", Throughput(500, 1_000_000_000), "floor", Throughput(1000, 1_000_000_000)),
        Sizes("request", (("body", 4000), ("headers", 200))),
        Failure("broken.one", "RuntimeError: no"),
    ]
    machine = Machine(2, "cpu", "3.11", "6.1", "3.40", "ext4")
    return render_markdown(machine, rows, 1.0)


def test_ratios_are_read_back_as_bench_run_prints_them(tmp_path: Path) -> None:
    got = ratios_of(_table(3.0, 2000))
    # Latency rows give p50 and p99 ratios; the escaped | stays in the name; a second
    # row of one name is numbered; size rows and failures have no ratio.
    assert got == {
        "send | recv (1 in flight)": [3.0, 6.0],
        "sends/s": [0.5],
        "sends/s #2": [2.0],
    }


def test_a_row_more_than_five_percent_worse_is_counted() -> None:
    runs = [(3.0, 2000), (3.1, 2000), (3.2, 2000)], [(3.3, 1960), (3.4, 1960), (3.5, 2000)]
    before, after = (medians([ratios_of(_table(*run)) for run in side]) for side in runs)
    table, worse = report(before, after)
    # Medians: p50 3.1 → 3.4 ms is 9.7% worse; sends/s 2000 → 1960 (shown 0.51×) is 2% worse.
    assert worse == 1
    assert (
        "send | recv (1 in flight) | 3.10× · 6.20× | 3.40× · 6.80× | 1.097 · 1.097 **worse**"
        in table
    )
    assert "| sends/s | 0.50× | 0.51× | 1.020 |" in table
    assert "| sends/s #2 | 2.00× | 2.00× | 1.000 |" in table
