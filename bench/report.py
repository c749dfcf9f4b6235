"""The machine a run happened on, and the tables it prints (text or markdown).

Timed rows (:class:`Row`) make the main table; counted ones (:class:`Sizes`)
a second table below it, with their parts as columns.
"""

from __future__ import annotations

import os
import platform
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.registry import Figure, Latency, Row, Sizes

__all__ = ["Failure", "Machine", "render_markdown", "render_text"]

BYTES_PER_TOKEN = 4  # the usual rough rule for English text and JSON
Item = Row | Sizes

RATIO_NOTE = (
    "ratio: figure ÷ floor for latency, floor ÷ figure for throughput — "
    "lower is better, 1.0× = as fast as the floor"
)


@dataclass(frozen=True)
class Failure:
    """A benchmark that raised: shown in the table instead of its rows."""

    benchmark: str
    error: str


@dataclass(frozen=True)
class Machine:
    nproc: int
    cpu: str
    python: str
    kernel: str
    sqlite: str
    filesystem: str

    @classmethod
    def detect(cls, workdir: Path) -> Machine:
        return cls(
            nproc=len(os.sched_getaffinity(0)),
            cpu=_cpu_model(),
            python=platform.python_version(),
            kernel=platform.release(),
            sqlite=sqlite3.sqlite_version,
            filesystem=_filesystem(workdir),
        )

    def lines(self) -> list[str]:
        return [
            f"machine: {self.nproc} CPUs, {self.cpu}",
            f"python {self.python}, sqlite {self.sqlite}, linux {self.kernel}",
            f"scratch filesystem: {self.filesystem}",
        ]


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown CPU"
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model"):
            return value.strip()
    return platform.processor() or "unknown CPU"


def _filesystem(path: Path) -> str:
    """Type and device of the mount holding ``path`` (fsync cost depends on it)."""
    best = ("", "?", "?")
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return "unknown"
    resolved = str(path.resolve())
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:
            continue
        device, point, fstype = parts[0], parts[1], parts[2]
        inside = resolved == point or resolved.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best[0]):
            best = (point, fstype, device)
    point, fstype, device = best
    return f"{fstype} on {device} (mounted at {point}; {path})"


# ---- cells ----------------------------------------------------------------------


def _figure(fig: Figure) -> str:
    if isinstance(fig, Latency):
        return f"p50 {_ms(fig.p50)} · p99 {_ms(fig.p99)} ms"
    return f"{fig.per_second:,.0f}/s"


def _ms(value: float) -> str:
    return f"{value:.3f}" if value < 1 else f"{value:.2f}"


def _ratio(row: Row) -> str:
    ratios = row.ratios()
    if len(ratios) == 2:
        return f"{ratios[0]:.2f}× · {ratios[1]:.2f}×"
    return f"{ratios[0]:.2f}×"


HEADER = ("benchmark", "figure", "floor (same run)", "floor figure", "ratio ↓", "target")


def _cells(items: Sequence[Item | Failure]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for item in items:
        if isinstance(item, Sizes):
            continue
        if isinstance(item, Failure):
            out.append((item.benchmark, f"FAILED: {item.error}", "", "", "", ""))
            continue
        out.append(
            (
                item.benchmark,
                _figure(item.figure),
                item.floor_name,
                _figure(item.floor),
                _ratio(item),
                item.target or "—",
            )
        )
    return out


def _size(n: int, unit: str = "bytes") -> str:
    if unit == "count":
        return f"{n:,}"
    if unit == "disk":
        return f"{n / 1e6:,.0f} MB"
    return f"{n:,} B (~{round(n / BYTES_PER_TOKEN):,} tok)"


_SIZE_HEADS = {"bytes": "sizes per request", "count": "counts", "disk": "sizes on disk"}


def _size_tables(items: Sequence[Item | Failure]) -> list[list[tuple[str, ...]]]:
    """One table per set of part labels: header row, then one row per Sizes."""
    tables: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for item in items:
        if isinstance(item, Sizes):
            labels = tuple(label for label, _ in item.parts)
            head = _SIZE_HEADS[item.unit]
            rows = tables.setdefault((head, *labels), [(head, *labels, "target")])
            rows.append(
                (
                    item.benchmark,
                    *(_size(n, item.unit) for _, n in item.parts),
                    item.target or "—",
                )
            )
    return list(tables.values())


def _text_table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def render_text(machine: Machine, items: Sequence[Item | Failure], elapsed_s: float) -> str:
    lines = [*machine.lines(), RATIO_NOTE, ""]
    cells = _cells(items)
    if cells or not any(isinstance(i, Sizes) for i in items):
        lines += _text_table([HEADER, *cells])
    for table in _size_tables(items):
        lines += ["", *_text_table(table)]
    notes = _notes(items)
    lines += ["", *notes, *([""] if notes else []), f"total {elapsed_s:.0f} s"]
    return "\n".join(line.rstrip() for line in lines)


def render_markdown(machine: Machine, items: Sequence[Item | Failure], elapsed_s: float) -> str:
    def esc(cell: str) -> str:
        return cell.replace("|", "\\|")

    lines = [f"{line}  " for line in machine.lines()]
    lines += [f"{RATIO_NOTE}; total {elapsed_s:.0f} s", ""]
    cells = _cells(items)
    if cells or not any(isinstance(i, Sizes) for i in items):
        lines.append("| " + " | ".join(HEADER) + " |")
        lines.append("|" + "|".join(["---", "--:", "---", "--:", "--:", "---"]) + "|")
        lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in cells]
    for table in _size_tables(items):
        lines += (
            ["", "| " + " | ".join(table[0]) + " |"]
            if cells
            else ["| " + " | ".join(table[0]) + " |"]
        )
        lines.append("|---|" + "--:|" * (len(table[0]) - 2) + "---|")
        lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in table[1:]]
    notes = _notes(items)
    if notes:
        lines += ["", *(f"- {n}" for n in notes)]
    return "\n".join(lines)


def _notes(items: Sequence[Item | Failure]) -> list[str]:
    return [f"{i.benchmark}: {i.note}" for i in items if isinstance(i, Row | Sizes) and i.note]
