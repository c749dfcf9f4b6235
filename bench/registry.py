"""What a benchmark is, what it returns, and where it is registered.

A benchmark is a plain function ``(ctx: Context) -> list[Row]`` decorated
with :func:`benchmark`. Any public module of the ``bench`` package is
imported by the runner, so adding a module is all it takes to add one.
Figures are reported, never asserted.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = [
    "REGISTRY",
    "Benchmark",
    "Context",
    "Latency",
    "Row",
    "Sizes",
    "Throughput",
    "benchmark",
]


@dataclass(frozen=True)
class Latency:
    """Per-operation wall times; shown as p50/p99 in milliseconds."""

    samples_ns: Sequence[int]

    @classmethod
    def of(cls, samples_ns: Sequence[int]) -> Latency:
        if not samples_ns:
            raise ValueError("a latency needs at least one sample")
        return cls(sorted(samples_ns))

    def percentile(self, p: float) -> float:
        """Nearest-rank percentile, in milliseconds."""
        rank = max(1, math.ceil(p / 100 * len(self.samples_ns)))
        return self.samples_ns[rank - 1] / 1e6

    @property
    def p50(self) -> float:
        return self.percentile(50)

    @property
    def p99(self) -> float:
        return self.percentile(99)


@dataclass(frozen=True)
class Throughput:
    """Operations per second over a timed run."""

    ops: int
    elapsed_ns: int

    @property
    def per_second(self) -> float:
        return self.ops / (self.elapsed_ns / 1e9)


Figure = Latency | Throughput


@dataclass(frozen=True)
class Row:
    """One line of the table: a figure beside the floor it is judged against."""

    benchmark: str
    figure: Figure
    floor_name: str
    floor: Figure
    target: str = ""
    note: str = ""  # printed under the table: what the figure is bound by, caveats

    def ratios(self) -> tuple[float, ...]:
        """Lower is better: figure/floor for latency, floor/figure for throughput."""
        if isinstance(self.figure, Latency) and isinstance(self.floor, Latency):
            return (self.figure.p50 / self.floor.p50, self.figure.p99 / self.floor.p99)
        if isinstance(self.figure, Throughput) and isinstance(self.floor, Throughput):
            return (self.floor.per_second / self.figure.per_second,)
        raise TypeError(f"{self.benchmark}: a figure and its floor must be the same kind")


@dataclass(frozen=True)
class Sizes:
    """A row of the second table: the parts of something, in bytes (~tokens shown).

    For what is counted rather than timed (what a request carries); rows of
    one benchmark module share their part labels, which become the columns.
    ``unit="count"`` shows plain counts instead (model requests, turns); ``unit="disk"``
    sizes on disk in MB (an image's layers), where tokens mean nothing.
    """

    benchmark: str
    parts: tuple[tuple[str, int], ...]
    target: str = ""
    note: str = ""
    unit: Literal["bytes", "count", "disk"] = "bytes"

    def get(self, label: str) -> int:
        return dict(self.parts)[label]


@dataclass
class Context:
    """What a benchmark gets: the size mode and a scratch directory of its own."""

    quick: bool
    workdir: Path
    _made: list[Path] = field(default_factory=list)

    def scratch(self, name: str) -> Path:
        """A fresh empty directory under the run's workdir (short: socket paths)."""
        path = self.workdir / f"{name}{len(self._made)}"
        path.mkdir(parents=True)
        self._made.append(path)
        return path

    def cleanup(self) -> None:
        for path in self._made:
            shutil.rmtree(path, ignore_errors=True)
        self._made.clear()


BenchFn = Callable[[Context], Sequence[Row | Sizes]]


@dataclass(frozen=True)
class Benchmark:
    name: str
    fn: BenchFn

    @property
    def group(self) -> str:
        return self.name.split(".", 1)[0]


REGISTRY: dict[str, Benchmark] = {}


def benchmark(name: str) -> Callable[[BenchFn], BenchFn]:
    """Register ``fn`` under ``name`` (``<module>.<what>``, e.g. ``coordinator.recv``)."""

    def register(fn: BenchFn) -> BenchFn:
        if name in REGISTRY:
            raise ValueError(f"benchmark {name!r} is registered twice")
        REGISTRY[name] = Benchmark(name, fn)
        return fn

    return register
