"""The claude CLI the agents run: where it is found, its pinned version, installing it.

Found, in this order: ``claude_bin`` in ``hive.toml``; the hive's own install
(``<home>/claude``, made by ``hivectl install-claude``); a checkout's
``node_modules`` (``scripts/bootstrap`` puts it there); ``claude`` on PATH.
A found path is absolute: inside the sandbox PATH is only the system's, so a
bare ``claude`` would not be found there (``bwrap: execvp claude``).

The version the hive is tested with is :data:`CLAUDE_CODE_VERSION`; it is the
one in the repository's ``package.json`` (a unit test keeps the two equal), so
an installed wheel knows it without the checkout.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import hyperhive
from hyperhive.errors import InstallProblem

__all__ = [
    "CLAUDE_CODE_PACKAGE",
    "CLAUDE_CODE_VERSION",
    "VERSION_PATTERN",
    "checkout_claude",
    "claude_version",
    "find_claude",
    "home_claude",
    "install_claude",
    "missing_claude_message",
    "require_claude",
]

CLAUDE_CODE_PACKAGE = "@anthropic-ai/claude-code"
CLAUDE_CODE_VERSION = "2.1.328"

VERSION_PATTERN = re.compile(r"\b(\d+\.\d+\.\d+)\b")


def home_claude(home: Path) -> Path:
    """Where ``hivectl install-claude`` puts the hive's own claude."""
    return home / "claude" / "node_modules" / ".bin" / "claude"


def checkout_claude() -> Path | None:
    """A git checkout's ``node_modules/.bin/claude``, when this package runs from one."""
    root = Path(hyperhive.__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file() or not (root / "src" / "hyperhive").is_dir():
        return None  # an installed wheel: site-packages has no checkout around it
    return root / "node_modules" / ".bin" / "claude"


def _runnable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_claude(configured: str | None, home: Path | None) -> tuple[Path | None, list[str]]:
    """The claude to run (absolute), and the places looked at, in order.

    ``configured`` (``claude_bin``) is taken as it is when it names a path; a bare
    name is looked up on PATH. Nothing else is tried when it is set: the operator
    chose, so a wrong choice is said rather than hidden by another claude.
    """
    if configured:
        if "/" in configured:
            path = Path(configured).expanduser()
            return (path.absolute() if path.exists() else None), [f"claude_bin = {configured!r}"]
        found = shutil.which(configured)
        return (Path(found).absolute() if found else None), [f"claude_bin = {configured!r} (PATH)"]
    looked: list[str] = []
    for candidate in (home_claude(home) if home else None, checkout_claude()):
        if candidate is None:
            continue
        looked.append(str(candidate))
        if _runnable(candidate):
            return candidate, looked
    looked.append("claude on PATH")
    found = shutil.which("claude")
    return (Path(found).absolute() if found else None), looked


def missing_claude_message(looked: list[str], home: Path) -> str:
    return (
        f"claude (the Claude Code CLI the agents run) was not found: looked at "
        f"{', '.join(looked)}. Install the version hyperhive is tested with "
        f"({CLAUDE_CODE_VERSION}) into this hive with `hivectl --home {home} install-claude` "
        "(needs npm), or set claude_bin in hive.toml to a claude the agents' users can run"
    )


def require_claude(configured: str | None, home: Path) -> Path:
    """:func:`find_claude`, or :class:`InstallProblem` saying how to install one."""
    found, looked = find_claude(configured, home)
    if found is None:
        raise InstallProblem(missing_claude_message(looked, home))
    return found


def claude_version(path: Path, timeout: float = 30.0) -> str | None:
    """``claude --version``'s version number (``2.1.328``), or None if it did not say."""
    try:
        out = subprocess.run(
            [str(path), "--version"],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "DISABLE_AUTOUPDATER": "1"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = VERSION_PATTERN.search(out.stdout)
    return match.group(1) if out.returncode == 0 and match else None


def install_claude(home: Path, npm: str = "npm") -> Path:
    """``npm install`` the pinned claude into ``<home>/claude``; the claude it installed.

    Idempotent: an install already at the pinned version is kept. The directory is
    made readable by every user (0755): the agents' users run what is in it.
    """
    target = home_claude(home)
    if _runnable(target) and claude_version(target) == CLAUDE_CODE_VERSION:
        return target
    npm_path = shutil.which(npm)
    if npm_path is None:
        raise InstallProblem(
            "npm is not installed, and installing claude needs it: install Node.js 22+ "
            "with npm (Debian: `apt install npm`), then run `hivectl install-claude` again"
        )
    prefix = home / "claude"
    prefix.mkdir(parents=True, exist_ok=True)
    prefix.chmod(0o755)
    result = subprocess.run(
        [
            npm_path,
            "install",
            "--prefix",
            str(prefix),
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            f"{CLAUDE_CODE_PACKAGE}@{CLAUDE_CODE_VERSION}",
        ],
        capture_output=True,
        text=True,
        umask=0o022,  # whatever the operator's umask: the agents' users read the install
    )
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-5:])
        raise InstallProblem(
            f"npm could not install {CLAUDE_CODE_PACKAGE}@{CLAUDE_CODE_VERSION} into "
            f"{prefix}: {tail}"
        )
    got = claude_version(target) if _runnable(target) else None
    if got != CLAUDE_CODE_VERSION:
        raise InstallProblem(
            f"npm finished, but {target} reports version {got or 'nothing'}, not "
            f"{CLAUDE_CODE_VERSION}; see `npm ls --prefix {prefix}`"
        )
    return target
