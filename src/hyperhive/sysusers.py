"""Per-agent system users: ``hh-<name>``, created on first need, removed on destroy.

Only root can do this; elsewhere :func:`ensure_user` returns None and the
caller runs the agent as the operator's own user (still inside bubblewrap)
and says so.
"""

from __future__ import annotations

import logging
import os
import pwd
import subprocess
from pathlib import Path

from hyperhive.errors import StorageError
from hyperhive.names import system_user

__all__ = [
    "can_manage_users",
    "chown_tree",
    "ensure_user",
    "home_problem",
    "remove_user",
    "traversal_problem",
]

log = logging.getLogger(__name__)


def can_manage_users() -> bool:
    return os.geteuid() == 0


def ensure_user(agent: str, home: Path) -> tuple[int, int] | None:
    """The agent's (uid, gid), creating its system user if missing; None if not root."""
    name = system_user(agent)
    try:
        entry = pwd.getpwnam(name)
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        pass
    if not can_manage_users():
        return None
    result = subprocess.run(
        [
            "useradd",
            "--system",
            "--user-group",
            "--no-create-home",
            "--home-dir",
            str(home),
            "--shell",
            "/usr/sbin/nologin",
            "--comment",
            f"hyperhive agent {agent}",
            name,
        ],
        capture_output=True,
        text=True,
    )
    try:
        entry = pwd.getpwnam(name)  # a concurrent useradd may have won the race
    except KeyError:
        raise StorageError(
            f"could not create system user {name}: {result.stderr.strip()}"
        ) from None
    log.info("created system user %s (uid %d) for agent %s", name, entry.pw_uid, agent)
    return entry.pw_uid, entry.pw_gid


def remove_user(agent: str) -> None:
    name = system_user(agent)
    try:
        pwd.getpwnam(name)
    except KeyError:
        return
    if can_manage_users():
        subprocess.run(["userdel", name], capture_output=True)
        log.info("removed system user %s", name)


def chown_tree(path: Path, uid: int, gid: int) -> None:
    """Give ``path`` (and, when its top is not yet theirs, everything under it) to the agent."""
    st = path.stat()
    if st.st_uid == uid and st.st_gid == gid:
        return
    for root, dirs, files in os.walk(path):
        os.chown(root, uid, gid, follow_symlinks=False)
        for entry in (*dirs, *files):
            os.lchown(os.path.join(root, entry), uid, gid)


def home_problem(home: Path, runtime: str) -> str | None:
    """Why agent users could not reach this hive's home, if they will be used at all.

    Checked before anything is created or started: otherwise the first sign is
    a ``git init … Permission denied`` from deep inside an agent's spawn.
    """
    if runtime != "bwrap" or not can_manage_users():
        return None  # agents run as the operator's own user, who reaches the home
    return traversal_problem(home / "agents" / "_")


def traversal_problem(path: Path) -> str | None:
    """Why another user could not reach ``path`` (a dir on the way lacks o+x), if so."""
    for parent in path.parents:
        try:
            mode = parent.stat().st_mode
        except OSError:
            continue
        if not mode & 0o001:
            return (
                f"{parent} is not traversable by other users (mode {oct(mode & 0o777)}), "
                f"so a sandboxed agent user cannot reach {path}; put HIVE_HOME somewhere "
                "reachable (e.g. /var/lib/hyperhive) or chmod o+x that directory"
            )
    return None
