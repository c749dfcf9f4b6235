"""``python -m bench.compare BEFORE AFTER [--rounds N] [--only NAME] [--quick]``.

Runs the benchmarks of two commits of this repository on one machine, in
turns (before, after, before, after …), and prints each row's ratio (figure ÷
its floor, as ``bench.run`` prints it) before and after, and the change. A
refactor is held to "no row more than 5% worse": the ratio is what is
compared, since its floor was measured in the same run as its figure, which
is what makes two runs on a noisy machine comparable at all. Ratios are read
as ``bench.run`` prints them (two decimals), so a change under ~1% of a ratio
near 1× is below what this can see.

Each commit's tree is unpacked from git (``git archive``) into a scratch
directory and its own ``bench`` runs against its own ``src``, with this
checkout's interpreter and claude (``node_modules``). Rows that exist in only
one commit are listed apart. Not a benchmark itself: ``bench.run`` skips it.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

WORSE_LIMIT = 1.05
"""A row whose median ratio grew by more than this factor is reported as worse."""

_RATIO = re.compile(r"([0-9]+(?:\.[0-9]+)?)×")
_CELL_BORDER = re.compile(r"(?<!\\)\|")  # render_markdown escapes a | inside a cell


@dataclass(frozen=True)
class Side:
    rev: str
    commit: str
    tree: Path


def ratios_of(markdown: str) -> dict[str, list[float]]:
    """Each timed row's ratios (one, or two for p50 · p99) from ``bench.run --markdown``.

    The first column names the row; the ratio column is the fifth. Rows of the
    counted tables, failures and the header have no ``×`` there and are skipped.
    """
    rows: dict[str, list[float]] = {}
    for line in markdown.splitlines():
        cells = [c.strip() for c in _CELL_BORDER.split(line.strip().strip("|"))]
        if len(cells) < 6:
            continue
        found = [float(x) for x in _RATIO.findall(cells[4])]
        if found:
            name = cells[0].replace("\\|", "|")
            # Two rows of one name (a benchmark's variants) are told apart by order.
            key, n = name, 1
            while key in rows:
                n += 1
                key = f"{name} #{n}"
            rows[key] = found
    return rows


def unpack(repo: Path, rev: str, into: Path) -> Side:
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", f"{rev}^{{commit}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    tree = into / commit[:12]
    tree.mkdir(mode=0o755)
    archive = subprocess.Popen(["git", "-C", str(repo), "archive", commit], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(tree)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise SystemExit(f"git archive {rev} failed")
    if (repo / "node_modules").exists():
        (tree / "node_modules").symlink_to(repo / "node_modules")
    return Side(rev, commit, tree)


def _bench_run(side: Side, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{side.tree / 'src'}{os.pathsep}{side.tree}"}
    return subprocess.run(
        [sys.executable, "-m", "bench.run", *args],
        cwd=side.tree,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


def common(sides: Sequence[Side], only: Sequence[str]) -> list[str]:
    """The benchmarks every side has, of those ``only`` names (full names or modules)."""
    listed = []
    for side in sides:
        done = _bench_run(side, ["--list"])
        if done.returncode != 0:
            raise SystemExit(f"bench.run --list failed at {side.rev}")
        listed.append(done.stdout.split())
    names = [n for n in listed[0] if all(n in other for other in listed[1:])]
    if only:
        names = [n for n in names if n in only or n.split(".", 1)[0] in only]
    if not names:
        raise SystemExit("no benchmark is in both commits (and in --only)")
    return names


def run_side(side: Side, args: Sequence[str]) -> dict[str, list[float]]:
    print(f"== {side.rev} ({side.commit[:10]}): bench.run {' '.join(args)}", file=sys.stderr)
    done = _bench_run(side, ["--markdown", *args])
    if done.returncode != 0:
        print(f"   (bench.run exited {done.returncode}: failed rows are left out)", file=sys.stderr)
    return ratios_of(done.stdout)


def medians(runs: Sequence[dict[str, list[float]]]) -> dict[str, list[float]]:
    """Per row present in every run: the median of each of its ratios."""
    names = set.intersection(*(set(r) for r in runs)) if runs else set()
    out: dict[str, list[float]] = {}
    for name in names:
        widths = {len(r[name]) for r in runs}
        if len(widths) != 1:
            continue
        out[name] = [statistics.median(r[name][i] for r in runs) for i in range(widths.pop())]
    return out


def report(before: dict[str, list[float]], after: dict[str, list[float]]) -> tuple[str, int]:
    """The comparison table, and how many rows are more than 5% worse."""
    lines = ["| benchmark | ratio before | ratio after | after ÷ before |", "|---|---|---|---|"]
    worse = 0
    for name in sorted(set(before) & set(after)):
        b, a = before[name], after[name]
        if len(b) != len(a):
            continue
        changes = [x / y if y else float("inf") for x, y in zip(a, b, strict=True)]
        flag = any(c > WORSE_LIMIT for c in changes)
        worse += flag
        cells = (
            name,
            " · ".join(f"{x:.2f}×" for x in b),
            " · ".join(f"{x:.2f}×" for x in a),
            " · ".join(f"{c:.3f}" for c in changes) + (" **worse**" if flag else ""),
        )
        lines.append("| " + " | ".join(cells) + " |")
    only = sorted(set(before) ^ set(after))
    if only:
        lines.append("")
        lines.append("rows in one commit only: " + ", ".join(only))
    return "\n".join(lines), worse


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__)
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each commit (default 2)")
    parser.add_argument("--only", action="append", default=[], metavar="NAME")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    repo = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="hh-bench-compare-") as tmp:
        os.chmod(tmp, 0o755)  # agents' users run the unpacked trees' code
        sides = [unpack(repo, rev, Path(tmp)) for rev in (args.before, args.after)]
        names = common(sides, args.only)
        bench_args = [*(["--quick"] if args.quick else []), *(f"--only={n}" for n in names)]
        runs: dict[str, list[dict[str, list[float]]]] = {s.commit: [] for s in sides}
        for _ in range(args.rounds):
            for side in sides:
                runs[side.commit].append(run_side(side, bench_args))
    before, after = medians(runs[sides[0].commit]), medians(runs[sides[1].commit])
    if not before or not after:
        print("a commit's benchmarks gave no row: nothing to compare", file=sys.stderr)
        return 2
    table, worse = report(before, after)
    print(
        f"before {sides[0].rev} ({sides[0].commit[:10]}), after {sides[1].rev} "
        f"({sides[1].commit[:10]}), median of {args.rounds} run(s) each, interleaved\n"
    )
    print(table)
    print(f"\n{worse} row(s) more than {WORSE_LIMIT - 1:.0%} worse")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
