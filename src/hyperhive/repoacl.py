"""Who may write an agent's proposed config repo: POSIX ACLs on it, kept in step with the tree.

A proposed config repo belongs to its agent's user; the agent and each of
its ancestors (other users) get a named-user entry plus a default one for
files created later. When the tree changes (a reparent), the repo's entries
are brought to exactly that set: the new ancestors gain one, the old lose
theirs. Entries for users that are not this hive's agents are never touched.
"""

from __future__ import annotations

import logging
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

__all__ = ["REPO_FILE_MODE", "acl_changes", "grant_repo", "named_uids", "revoke_repo", "sync_repo"]

log = logging.getLogger(__name__)

_NAMED = re.compile(r"^(?:default:)?user:(\d+):", re.MULTILINE)


def acl_changes(
    current: Iterable[int], wanted: Iterable[int], hive_uids: Iterable[int]
) -> tuple[frozenset[int], frozenset[int]]:
    """(uids to grant, uids to revoke): only the hive's own users are ever revoked."""
    have, want = frozenset(current), frozenset(wanted)
    return want - have, (have & frozenset(hive_uids)) - want


def named_uids(repo: Path) -> frozenset[int]:
    """The uids named in the repo's top directory's ACL (access or default entries)."""
    result = subprocess.run(
        ["getfacl", "--numeric", "--omit-header", "--absolute-names", str(repo)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        log.warning("could not read the ACL of %s: %s", repo, result.stderr.strip())
        return frozenset()
    return frozenset(int(uid) for uid in _NAMED.findall(result.stdout))


def _setfacl(repo: Path, args: list[str], what: str) -> None:
    result = subprocess.run(["setfacl", "-R", *args, str(repo)], capture_output=True, text=True)
    if result.returncode != 0:
        log.warning(
            "could not %s on %s: %s (install Debian's acl)",
            what,
            repo,
            result.stderr.strip() or result.returncode,
        )


# The mode of a file the host writes into a proposed repo (or a mirror): with an ACL,
# its group bits are the mask, so 0644 would cap every writer's named entry at read
# until the next grant. The owning group still gets only its own ``group::`` entry.
REPO_FILE_MODE = 0o664


def grant_repo(repo: Path, uid: int) -> None:
    """Let ``uid`` read and write ``repo`` (and what others create in it later)."""
    _setfacl(repo, ["-m", f"u:{uid}:rwX,d:u:{uid}:rwX"], f"grant uid {uid} access")


def revoke_repo(repo: Path, uid: int) -> None:
    """Take ``uid``'s named entries (access and default) off ``repo``."""
    _setfacl(repo, ["-x", f"u:{uid},d:u:{uid}"], f"revoke uid {uid}'s access")


def sync_repo(repo: Path, wanted: Iterable[int], hive_uids: Iterable[int]) -> None:
    """Bring ``repo``'s named entries to ``wanted`` (among the hive's users)."""
    grant, revoke = acl_changes(named_uids(repo), wanted, hive_uids)
    for uid in sorted(revoke):
        revoke_repo(repo, uid)
    for uid in sorted(grant):
        grant_repo(repo, uid)
