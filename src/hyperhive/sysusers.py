"""Per-agent system users, one set per hive: created on first need, removed on destroy.

An agent's user is ``hh-<hive id>-<name>`` (see ``names.system_user``); the
hive id is generated once and kept in ``<home>/hive-id``. The user's comment
(GECOS) says which hive and agent it belongs to, and a user whose comment is
not this hive's is never used nor deleted: two hives on one machine never
share a uid, and destroying ``queen`` in one leaves the other's alone.

Upgrading: an agent of this hive whose user is still the old ``hh-<name>``
keeps its uid — the user is renamed (``usermod -l``) and marked, so every
file it owns stays its own. It is claimed only if this home's agent
directory belongs to it (another hive sharing it gets a fresh user).

Only root can do any of this; elsewhere :func:`ensure_user` returns None and
the caller runs the agent as the operator's own user (still inside
bubblewrap), whatever ``hh-*`` users the machine has.
"""

from __future__ import annotations

import logging
import os
import pwd
import secrets
import string
import subprocess
from pathlib import Path

from hyperhive.atomic import atomic_write_text
from hyperhive.config import HivePaths
from hyperhive.errors import ConfigError, StorageError
from hyperhive.names import HIVE_ID_LENGTH, legacy_system_user, system_user

__all__ = [
    "adopt_hive_id",
    "agent_user",
    "can_manage_users",
    "chown_tree",
    "ensure_user",
    "existing_uid",
    "hive_id",
    "home_problem",
    "owner_comment",
    "remove_user",
    "traversal_problem",
]

log = logging.getLogger(__name__)

_ID_ALPHABET = string.ascii_lowercase + string.digits


def can_manage_users() -> bool:
    return os.geteuid() == 0


def hive_id(paths: HivePaths) -> str:
    """This hive's short stable id, generated on first use and kept in ``<home>/hive-id``."""
    path = paths.home / "hive-id"
    try:
        return _valid_id(path, path.read_text().strip())
    except FileNotFoundError:
        pass
    new = "".join(secrets.choice(_ID_ALPHABET) for _ in range(HIVE_ID_LENGTH))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".hive-id.{os.getpid()}.tmp")
    tmp.write_text(new + "\n")
    try:
        os.link(tmp, path)  # atomic and exclusive: a concurrent first start keeps one id
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    return _valid_id(path, path.read_text().strip())


def adopt_hive_id(paths: HivePaths, value: str) -> bool:
    """Take the coordinator's hive id (handed over at registration) as this home's, so a
    host on another machine names its agents' users ``hh-<hive id>-<agent>`` exactly as
    the coordinator's machine would. ``True`` if the file changed."""
    path = paths.home / "hive-id"
    _valid_id(path, value)
    try:
        current = path.read_text().strip()
    except FileNotFoundError:
        current = None
    if current == value:
        return False
    if current is not None:
        log.warning(
            "%s held hive id %r; the coordinator's hive is %r: taking it (system users "
            "named after the old id are no longer this hive's)",
            path,
            current,
            value,
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, value + "\n")
    return True


def _valid_id(path: Path, value: str) -> str:
    if len(value) != HIVE_ID_LENGTH or any(c not in _ID_ALPHABET for c in value):
        raise ConfigError(
            f"holds {value!r}, not a hive id ({HIVE_ID_LENGTH} of [a-z0-9]); restore it "
            "(the agents' system users are named after it: `getent passwd | grep hyperhive`)",
            path=str(path),
        )
    return value


def agent_user(paths: HivePaths, agent: str) -> str:
    """The name of ``agent``'s system user in this hive."""
    return system_user(hive_id(paths), agent)


def owner_comment(paths: HivePaths, agent: str) -> str:
    """The GECOS field that marks a user as this hive's ``agent``."""
    return f"hyperhive hive {hive_id(paths)} agent {agent}"


def _legacy_comment(agent: str) -> str:
    return f"hyperhive agent {agent}"


def _lookup(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True)


def _claim_legacy(paths: HivePaths, agent: str, name: str) -> pwd.struct_passwd | None:
    """Rename this hive's old ``hh-<agent>`` user to ``name``, keeping its uid."""
    old = _lookup(legacy_system_user(agent))
    if old is None or old.pw_gecos != _legacy_comment(agent):
        return None
    try:
        mine = paths.agent_state(agent).stat().st_uid == old.pw_uid
    except OSError:
        mine = False
    if not mine:
        return None  # another hive's (or an orphan): leave it, make a fresh user
    result = _run(["usermod", "-l", name, "-c", owner_comment(paths, agent), old.pw_name])
    if result.returncode != 0:
        # e.g. a process still runs as it: keep using it as it is, rename on a later start.
        log.warning(
            "kept system user %s for agent %s this time (renaming it to %s failed: %s)",
            old.pw_name,
            agent,
            name,
            result.stderr.strip(),
        )
        return old
    group = _run(["groupmod", "-n", name, old.pw_name])
    if group.returncode != 0:
        log.warning("kept group %s for user %s: %s", old.pw_name, name, group.stderr.strip())
    log.info("migrated system user %s to %s (uid %d kept)", old.pw_name, name, old.pw_uid)
    return _lookup(name)


def ensure_user(paths: HivePaths, agent: str) -> tuple[int, int] | None:
    """The agent's (uid, gid), creating its system user if missing; None if not root."""
    if not can_manage_users():
        return None  # the operator's own user runs agents, whatever users exist
    name = agent_user(paths, agent)
    comment = owner_comment(paths, agent)
    entry = _lookup(name)
    if entry is not None:
        if entry.pw_gecos != comment:
            raise StorageError(
                f"system user {name} exists but is not agent {agent} of this hive (its "
                f"comment is {entry.pw_gecos!r}, expected {comment!r}); remove it "
                f"(userdel {name}) if it is left over, or give {paths.home / 'hive-id'} "
                "its old value back"
            )
        return entry.pw_uid, entry.pw_gid
    entry = _claim_legacy(paths, agent, name)
    if entry is not None:
        return entry.pw_uid, entry.pw_gid
    result = _run(
        [
            "useradd",
            "--system",
            "--user-group",
            "--no-create-home",
            "--home-dir",
            str(paths.agent_home(agent)),
            "--shell",
            "/usr/sbin/nologin",
            "--comment",
            comment,
            name,
        ]
    )
    entry = _lookup(name)  # a concurrent useradd may have won the race
    if entry is None or entry.pw_gecos != comment:
        raise StorageError(f"could not create system user {name}: {result.stderr.strip()}")
    log.info("created system user %s (uid %d) for agent %s", name, entry.pw_uid, agent)
    return entry.pw_uid, entry.pw_gid


def existing_uid(paths: HivePaths, agent: str) -> int | None:
    """The uid of ``agent``'s user in this hive if it exists (never creates one)."""
    if not can_manage_users():
        return None
    entry = _lookup(agent_user(paths, agent))
    if entry is None or entry.pw_gecos != owner_comment(paths, agent):
        return None
    return entry.pw_uid


def remove_user(paths: HivePaths, agent: str) -> None:
    """Delete the agent's user, only if it is marked as this hive's."""
    if not can_manage_users():
        return
    name = agent_user(paths, agent)
    entry = _lookup(name)
    if entry is None:
        return
    if entry.pw_gecos != owner_comment(paths, agent):
        log.warning("not removing system user %s: it is not this hive's (%r)", name, entry.pw_gecos)
        return
    result = _run(["userdel", name])
    if result.returncode != 0:
        log.warning("could not remove system user %s: %s", name, result.stderr.strip())
    else:
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
