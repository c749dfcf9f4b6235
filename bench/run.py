"""``python -m bench.run [--quick] [--only NAME] [--markdown]``: run and print one table."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

import bench
from bench.registry import REGISTRY, Benchmark, Context, Row, Sizes
from bench.report import Failure, Machine, render_markdown, render_text

# Modules of the package that hold no benchmarks.
_NOT_BENCHMARKS = frozenset({"run", "registry", "report", "compare"})


def discover() -> dict[str, Benchmark]:
    """Import every public module of ``bench``; their ``@benchmark``s register."""
    for info in pkgutil.iter_modules(bench.__path__):
        if info.name.startswith("_") or info.name in _NOT_BENCHMARKS:
            continue
        importlib.import_module(f"bench.{info.name}")
    return dict(REGISTRY)


def select(found: dict[str, Benchmark], only: Sequence[str]) -> list[Benchmark]:
    """``--only`` takes a full name (``coordinator.recv``) or a module (``coordinator``)."""
    if not only:
        return list(found.values())
    chosen = [b for b in found.values() if b.name in only or b.group in only]
    unknown = [o for o in only if not any(o in (b.name, b.group) for b in found.values())]
    if unknown:
        names = ", ".join(found)
        raise SystemExit(f"unknown benchmark {', '.join(unknown)}; known: {names}")
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="small sizes: a smoke run well under a minute"
    )
    parser.add_argument(
        "--only", action="append", default=[], metavar="NAME", help="a benchmark or module"
    )
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.add_argument(
        "--dir", type=Path, default=None, help="scratch parent (default: the system temp dir)"
    )
    args = parser.parse_args(argv)

    found = discover()
    if args.list:
        for name in found:
            print(name)
        return 0
    chosen = select(found, args.only)

    items: list[Row | Sizes | Failure] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hhb-", dir=args.dir) as tmp:
        workdir = Path(tmp)
        machine = Machine.detect(workdir)
        for bm in chosen:
            print(f"running {bm.name} ...", file=sys.stderr, flush=True)
            ctx = Context(quick=args.quick, workdir=workdir)
            t0 = time.monotonic()
            try:
                items.extend(bm.fn(ctx))
            except Exception as exc:  # one broken benchmark must not hide the others
                traceback.print_exc()
                items.append(Failure(bm.name, f"{type(exc).__name__}: {exc}"))
            finally:
                ctx.cleanup()
            print(f"  {bm.name}: {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
    elapsed = time.monotonic() - started

    render = render_markdown if args.markdown else render_text
    print(render(machine, items, elapsed))
    return 1 if any(isinstance(i, Failure) for i in items) else 0


if __name__ == "__main__":
    sys.exit(main())
