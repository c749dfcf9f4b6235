"""Config repos as the tests read them: when a host's seed of one has settled."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["seeded"]


def seeded(repo: Path) -> bool:
    """The seed's commit is in, and the repo's index written to match it.

    The host moves HEAD and *then* updates the index in a separate ``git`` run,
    with no lock held in between: HEAD alone does not say the files have stopped
    changing (a snapshot would see the index change; a commit of the test's own
    could meet the host's ``index.lock``).
    """
    git = ["git", "-c", "safe.directory=*", "-C", str(repo)]
    shown = subprocess.run([*git, "cat-file", "-e", "HEAD:agent.toml"], capture_output=True)
    if shown.returncode != 0 or (repo / ".git" / "index.lock").exists():
        return False
    return subprocess.run([*git, "diff-index", "--cached", "--quiet", "HEAD", "--"]).returncode == 0
