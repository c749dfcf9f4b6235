"""Resolving an agent's :class:`~hyperhive.agent.bwrap.Isolation` on this host.

The I/O half beside the pure argv builder: the agent's system user, the
ownership of its dirs, its cgroups, and which host paths the sandbox needs
read-only (the Python environment, this package, the claude install).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import hyperhive
from hyperhive.agent.bwrap import SYSTEM_LINKS, SYSTEM_RO, Isolation
from hyperhive.agent.cgroups import prepare_cgroups
from hyperhive.errors import ConfigError
from hyperhive.sysusers import agent_user, chown_tree, ensure_user, traversal_problem

if TYPE_CHECKING:
    from hyperhive.agent.runtime import AgentRuntime

__all__ = ["build_isolation", "readonly_paths"]

log = logging.getLogger(__name__)


def _claude_dir(claude_bin: str | None) -> Path | None:
    if not claude_bin or "/" not in claude_bin:
        return None
    real = Path(os.path.realpath(claude_bin))
    for parent in real.parents:
        if parent.name == "node_modules":
            return parent
    return real.parent


def readonly_paths(claude_bin: str | None) -> tuple[Path, ...]:
    """Host paths every sandbox needs to read (outside the system dirs)."""
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(hyperhive.__file__).parents[1]}
    claude = _claude_dir(claude_bin)
    if claude is not None:
        paths.add(claude)
    system = tuple(Path(p) for p in SYSTEM_RO)
    out = []
    for p in sorted(paths):
        if not p.exists() or any(p.is_relative_to(s) for s in system):
            continue
        problem = traversal_problem(p / "_")
        if problem is not None:
            # bwrap (as the agent's user) could not even open it: leave it out and say so.
            log.warning("not binding %s into sandboxes: %s", p, problem)
            continue
        out.append(p)
    return tuple(out)


def grant_repo(repo: Path, uid: int) -> None:
    """Let ``uid`` read and write ``repo`` (and what others create in it later): ACLs.

    A proposed config repo belongs to its agent's user; each ancestor (another
    user) gets a named-user entry plus a default one for files created later.
    """
    entry = f"u:{uid}:rwX,d:u:{uid}:rwX"
    result = subprocess.run(
        ["setfacl", "-R", "-m", entry, str(repo)], capture_output=True, text=True
    )
    if result.returncode != 0:
        log.warning(
            "could not grant uid %d access to %s: %s (install Debian's acl)",
            uid,
            repo,
            result.stderr.strip() or result.returncode,
        )


def build_isolation(rt: AgentRuntime) -> tuple[Isolation, list[str]]:
    """The agent's sandbox: its user (created if missing), dirs it owns, limits."""
    notes: list[str] = []
    own = [rt.state_dir, rt.paths.agent_home(rt.name), rt.paths.agent_work(rt.name)]
    problem = traversal_problem(rt.state_dir)
    ids = ensure_user(rt.paths, rt.name)
    if ids is None:
        notes.append(
            "not root: agents run as the host's own user (still inside bubblewrap), "
            "so they are not kept out of each other's directories"
        )
    elif problem is not None:
        raise ConfigError(problem)
    else:
        # Traverse-only parents: an agent reaches its own dirs, cannot list its neighbours.
        # (run/ itself holds only 0600 files: the operator and host sockets, tokens.)
        for parent in (
            rt.paths.agent_dir(rt.name),
            rt.paths.agent_dir(rt.name).parent,
            rt.paths.run,
            rt.runtime_dir.parent,
            rt.paths.agent_sock(rt.name).parent,
        ):
            parent.mkdir(parents=True, exist_ok=True)
            parent.chmod(0o711)
        for d in own:
            chown_tree(d, *ids)
        # The runtime dir stays root's (0711): the agent reads the files it is given
        # there but cannot swap them for links between the host's write and chown.
        rt.runtime_dir.chmod(0o711)
    rw = list(own)
    mine = rt.paths.agent_config_repo(rt.name)
    if mine.exists():
        rw.append(mine)  # it edits its own proposed config
        if ids is not None:
            grant_repo(mine, ids[0])  # and reads what its ancestors commit there
    for child in rt.descendants:
        repo = rt.paths.agent_config_repo(child)
        if repo.exists():
            rw.append(repo)
            if ids is not None:
                grant_repo(repo, ids[0])
    cgroups, problems = prepare_cgroups(
        rt.name, rt.config.limits, unit=agent_user(rt.paths, rt.name)
    )
    notes.extend(f"limit not applied: {p}" for p in problems)
    existing = frozenset(
        p for p in (*SYSTEM_RO, *(link for link, _ in SYSTEM_LINKS)) if os.path.lexists(p)
    )
    iso = Isolation(
        agent=rt.name,
        uid=ids[0] if ids else None,
        gid=ids[1] if ids else None,
        rw=tuple(rw),
        ro=(*readonly_paths(rt.hive.claude_bin), rt.runtime_dir),
        sockets=(rt.paths.agent_sock(rt.name),),
        cgroups=cgroups,
        existing=existing,
    )
    for note in notes:
        log.warning("%s: %s", rt.name, note)
    return iso, notes
