"""An unexpected error in ``hivectl`` says what failed, its text and where the traceback is."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path


def test_an_unexpected_error_is_never_a_bare_exception_name(tmp_path: Path) -> None:
    # /proc refuses a new directory: an OSError no hyperhive code translates.
    out = subprocess.run(
        [sys.executable, "-m", "hyperhive", "--home", "/proc/self/no-hive-here", "login"],
        input="a-key\n",
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)},
    )
    assert out.returncode == 1
    assert "internal error in `login`: FileNotFoundError: [Errno 2]" in out.stderr
    assert "Traceback" not in out.stderr  # the console gets the lines above, not a dump
    where = re.search(r"the traceback is in (\S+)", out.stderr)
    assert where is not None, out.stderr
    saved = Path(where.group(1))
    assert saved.parent == tmp_path and "Traceback (most recent call last)" in saved.read_text()
