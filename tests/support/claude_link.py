"""A claude of its own in a directory a test can close to the agents' users.

A hard link of the real claude binary, in a fresh directory inside the project's
``node_modules`` (same filesystem, so no 370 MB copy; bound into sandboxes like
the real one). ``chmod 0700`` on that directory puts it out of the agents'
reach without touching the claude other tests run.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["linked_claude"]


@contextmanager
def linked_claude(claude_bin: Path) -> Iterator[Path]:
    real = Path(os.path.realpath(claude_bin))
    modules = next(p for p in real.parents if p.name == "node_modules")
    where = Path(tempfile.mkdtemp(prefix=".hh-test-claude-", dir=modules))
    where.chmod(0o755)
    try:
        os.link(real, where / "claude")
        yield where / "claude"
    finally:
        where.chmod(0o755)
        shutil.rmtree(where, ignore_errors=True)
