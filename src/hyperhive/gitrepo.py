"""The wrapper git runs through, for the meta mirror and agents' proposed config repos.

``agents/<name>/config/`` holds the agent's proposed ``agent.toml`` on the
disk of its host (``agent/hostdisk.py``); ``meta/`` is the store's exported
mirror on the coordinator's (``core/state/mirror.py``). All git runs through
``_git`` with a fixed identity and no hooks or user config, so a repo an agent
can write to cannot make its host run anything.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

from hyperhive.errors import ConfigError, NotFound, StorageError

__all__ = ["AGENT_TOML", "GitRepo", "git_available"]

AGENT_TOML = "agent.toml"
_COMMIT_RE = re.compile(r"[0-9a-fA-F]{4,40}|HEAD(~\d+)?")
_ENV = {
    "GIT_AUTHOR_NAME": "hyperhive",
    "GIT_AUTHOR_EMAIL": "hyperhive@localhost",
    "GIT_COMMITTER_NAME": "hyperhive",
    "GIT_COMMITTER_EMAIL": "hyperhive@localhost",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
}


def git_available() -> bool:
    return subprocess.run(["git", "--version"], capture_output=True).returncode == 0


class GitRepo:
    """A small, safe wrapper over one git working tree."""

    def __init__(self, path: Path, run_as: tuple[int, int] | None = None) -> None:
        self.path = path
        # A repo an agent can write is only ever touched by git as that agent: its
        # .git/config could define filters, which must never run as root.
        self.run_as = run_as

    def _git(
        self,
        *args: str,
        check: bool = True,
        stdin: str | None = None,
        env_extra: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        env = {**_ENV, "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.path)}
        drop: list[str] = []
        if self.run_as is not None:
            uid, gid = self.run_as
            drop = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]
        cmd = [
            *drop,
            "git",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "safe.directory=*",
            "-c",
            "commit.gpgsign=false",
            # Repo-local config can name commands; the ones plumbing might reach are off.
            "-c",
            "core.fsmonitor=false",
            "-C",
            str(self.path),
            *args,
        ]
        result = subprocess.run(
            cmd, capture_output=True, text=True, env={**env, **(env_extra or {})}, input=stdin
        )
        if check and result.returncode != 0:
            raise StorageError(
                f"git {' '.join(args[:2])} failed in {self.path}: {result.stderr.strip()[:300]}"
            )
        return result

    def ensure(self) -> None:
        """Create the repo (with an empty first commit) if it is not one yet."""
        self.path.mkdir(parents=True, exist_ok=True)
        if (self.path / ".git").exists():
            if self._git("rev-parse", "--verify", "-q", "HEAD", check=False).returncode == 0:
                return
            # A half-made repo (an init cut short, e.g. by a full disk): start it over.
            aside = self.path / f".git.broken-{time.time_ns()}"
            (self.path / ".git").rename(aside)
        self._git("init", "-q", "-b", "main")
        self._git("commit", "-q", "--allow-empty", "-m", "hyperhive: initial commit")

    def commit(self, message: str, paths: list[str]) -> str | None:
        """Stage ``paths`` (adds and removals) and commit; None if nothing changed."""
        self._git("add", "-A", "--", *paths)
        if self._git("diff", "--cached", "--quiet", check=False).returncode == 0:
            return None
        self._git("commit", "-q", "-m", message)
        return self.head()

    def commit_file(self, message: str, name: str, text: str) -> str | None:
        """Commit ``text`` as ``name`` with plumbing only: no clean/smudge filter or hook
        a writable ``.git`` might define ever runs. None if nothing changed."""
        blob = self._git("hash-object", "-w", "--no-filters", "--stdin", stdin=text)
        index = {"GIT_INDEX_FILE": str(self.path / ".git" / f"hh-index-{os.getpid()}")}
        try:
            self._git("read-tree", "HEAD", env_extra=index)
            self._git(
                "update-index",
                "--add",
                "--cacheinfo",
                f"100644,{blob.stdout.strip()},{name}",
                env_extra=index,
            )
            tree = self._git("write-tree", env_extra=index).stdout.strip()
        finally:
            Path(index["GIT_INDEX_FILE"]).unlink(missing_ok=True)
        if tree == self._git("rev-parse", "HEAD^{tree}").stdout.strip():
            return None
        commit = self._git("commit-tree", tree, "-p", "HEAD", "-m", message).stdout.strip()
        self._git("update-ref", "HEAD", commit)
        # Keep the repo's own index in step for that one file (nothing else of it touched).
        self._git("update-index", "--add", "--cacheinfo", f"100644,{blob.stdout.strip()},{name}")
        return commit

    def head(self) -> str:
        return self._git("rev-parse", "HEAD").stdout.strip()

    def resolve(self, commit: str) -> str:
        """A full commit id for ``commit`` (hex prefix or HEAD~n), or NotFound."""
        if not _COMMIT_RE.fullmatch(commit):
            raise NotFound(f"{commit!r} is not a commit id (hex, or HEAD / HEAD~n)")
        result = self._git("rev-parse", "--verify", "-q", f"{commit}^{{commit}}", check=False)
        if result.returncode != 0:
            raise NotFound(f"no commit {commit!r} in {self.path}")
        return result.stdout.strip()

    def subject(self, commit: str) -> str:
        """The subject line of ``commit`` (a full id)."""
        return self._git("log", "-1", "--format=%s", commit).stdout.strip()

    def size(self, commit: str, path: str) -> int | None:
        """The size in bytes of ``path`` at ``commit`` (a full id); None if it has none."""
        result = self._git("cat-file", "-s", f"{commit}:{path}", check=False)
        return int(result.stdout) if result.returncode == 0 else None

    def show(self, commit: str, path: str) -> str:
        """The text of ``path`` at ``commit``."""
        full = self.resolve(commit)
        result = self._git("cat-file", "blob", f"{full}:{path}", check=False)
        if result.returncode != 0:
            raise ConfigError(f"commit {full[:12]} has no {path}", path=str(self.path / path))
        return result.stdout

    def log(self, limit: int = 50) -> list[dict[str, str]]:
        out = self._git("log", f"-{limit}", "--format=%H%x00%ct%x00%s").stdout
        rows = []
        for line in out.splitlines():
            sha, when, subject = line.split("\x00", 2)
            rows.append({"commit": sha, "time": when, "subject": subject})
        return rows

    def clean_tree(self) -> bool:
        """No half-written state: nothing staged or modified in the work tree."""
        return not self._git("status", "--porcelain").stdout.strip()
