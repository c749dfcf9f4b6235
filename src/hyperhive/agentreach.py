"""Whether the agents' users can run what they must: claude, the Python, this package.

As root, every agent runs under bubblewrap as its own system user, who is
"other" to every file of the install: one directory on the way without o+x, or
a file without o+r (o+x to run it), keeps it out. Inside the sandbox only the
system dirs and the install dirs bound in are there. Both are checked before
anything starts (``hivectl up``, ``hivectl host``, ``hivectl doctor``) and again
before each turn, so the operator reads what to do instead of every turn failing
with ``bwrap: execvp claude: No such file or directory``.
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

import hyperhive
from hyperhive.claudebin import require_claude
from hyperhive.errors import InstallProblem

__all__ = [
    "INSTALL_REMEDY",
    "Unrunnable",
    "agent_users",
    "claude_install_dir",
    "claude_problem",
    "launch_problem",
    "python_problem",
    "reach_problem",
    "refuse_unrunnable",
    "sandbox_claude",
]

# Bound into every sandbox (agent/bwrap.py's SYSTEM_RO, and the links to /usr).
_SANDBOX_SYSTEM = (Path("/usr"), Path("/etc"), Path("/opt"), Path("/bin"), Path("/sbin"))

INSTALL_REMEDY = (
    "install hyperhive where they can reach it: a venv on Debian's own Python outside "
    "/root, e.g. `/usr/bin/python3 -m venv /opt/hyperhive && /opt/hyperhive/bin/pip "
    "install hyperhive-VERSION-py3-none-any.whl`, then run /opt/hyperhive/bin/hivectl "
    "(root's home is mode 0700, so a venv or a Python under it, pyenv's too, is out of reach)"
)


@dataclass(frozen=True)
class Unrunnable:
    """What the agents cannot run or read, and what to do about it."""

    detail: str
    remedy: str

    @property
    def text(self) -> str:
        return f"{self.detail}; {self.remedy}"


def _closed_dir(path: Path) -> Path | None:
    """The first directory on the way to ``path`` that other users cannot traverse."""
    for parent in reversed(path.parents):
        try:
            mode = parent.stat().st_mode
        except OSError:
            continue
        if not mode & stat.S_IXOTH:
            return parent
    return None


def reach_problem(path: Path, *, execute: bool) -> str | None:
    """Why another user could not read (and, with ``execute``, run) ``path``, if so.

    The path as given and the file it resolves to are both checked: the kernel walks
    the link's directory, then the target's.
    """
    real = Path(os.path.realpath(path))
    for way in dict.fromkeys((path.absolute(), real)):
        closed = _closed_dir(way)
        if closed is not None:
            closed_mode = oct(closed.stat().st_mode & 0o777)
            return f"{closed} (on the way to it) is mode {closed_mode}, closed to other users"
    try:
        mode = real.stat().st_mode
    except OSError as exc:
        return f"{real} cannot be read: {exc.strerror or exc}"
    want = stat.S_IROTH | (stat.S_IXOTH if execute else 0)
    if mode & want != want:
        can = "readable and runnable" if execute else "readable"
        return f"{real} is mode {oct(mode & 0o777)}, not {can} by other users"
    return None


def claude_install_dir(claude: Path) -> Path:
    """What the sandbox binds for ``claude``: its ``node_modules`` or its own directory."""
    real = Path(os.path.realpath(claude))
    for parent in real.parents:
        if parent.name == "node_modules":
            return parent
    return real.parent


def sandbox_claude(claude: Path) -> Path:
    """The path to run ``claude`` by inside the sandbox: as given when the sandbox sees
    it there (a system dir, or inside its install dir), else the file it resolves to."""
    seen = (*_SANDBOX_SYSTEM, claude_install_dir(claude))
    if any(claude.absolute().is_relative_to(d) for d in seen):
        return claude.absolute()
    return Path(os.path.realpath(claude))


def claude_problem(claude: Path, home: Path, *, agent_users: bool) -> Unrunnable | None:
    """Why agents could not run ``claude``, with the remedy; None if they can."""
    if not (claude.is_file() and os.access(claude, os.X_OK)):
        why = "is not there" if not claude.exists() else "is not an executable file"
        return Unrunnable(
            f"claude at {claude} {why}",
            f"install it with `hivectl --home {home} install-claude`, or set claude_bin in "
            "hive.toml",
        )
    if not agent_users:
        return None
    reason = reach_problem(claude, execute=True)
    if reason is None:
        return None
    return Unrunnable(
        f"claude at {claude} cannot be run by the agents' users: {reason}",
        f"install the pinned claude where they can: `hivectl --home {home} install-claude` "
        f"(into {home / 'claude'}), or point claude_bin in hive.toml at a claude under "
        "/usr/local or /opt (every directory on the way mode 0755)",
    )


def python_problem() -> Unrunnable | None:
    """Why agents could not run this Python or read this package, with the remedy."""
    wanted = (
        ("the Python hyperhive runs on", Path(sys.executable), True),
        ("its standard library", Path(os.__file__), False),
        ("the hyperhive package", Path(hyperhive.__file__), False),
    )
    for what, path, execute in wanted:
        reason = reach_problem(path, execute=execute)
        if reason is not None:
            return Unrunnable(
                f"{what} ({path}) is out of the agents' users' reach: {reason}", INSTALL_REMEDY
            )
    return None


def agent_users(runtime: str) -> bool:
    """Whether agents run as users of their own (as root, under bubblewrap)."""
    return runtime == "bwrap" and os.geteuid() == 0


def launch_problem(claude: Path, home: Path, runtime: str) -> Unrunnable | None:
    """What keeps this machine's agents from running, checked before anything starts."""
    own_users = agent_users(runtime)
    problem = claude_problem(claude, home, agent_users=own_users)
    if problem is None and own_users:
        problem = python_problem()
    return problem


def refuse_unrunnable(configured: str | None, home: Path, runtime: str) -> Path:
    """The claude this machine's agents will run (as their sandbox sees it), or
    :class:`InstallProblem` with the remedy: run by ``up`` and ``host`` before they start."""
    claude = sandbox_claude(require_claude(configured, home))
    problem = launch_problem(claude, home, runtime)
    if problem is not None:
        raise InstallProblem(problem.text)
    return claude
