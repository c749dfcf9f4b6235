"""Resolving an agent's :class:`~hyperhive.agent.bwrap.Isolation` on this host.

The I/O half beside the pure argv builder: the agent's system user, the
ownership of its dirs, its cgroups, and which host paths the sandbox needs
read-only (the Python environment, this package, the claude install).
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import replace
from pathlib import Path

import hyperhive
from hyperhive.agent.bwrap import SYSTEM_LINKS, SYSTEM_RO, Isolation
from hyperhive.agent.cgroups import prepare_cgroups
from hyperhive.agent.spec import AgentSpec
from hyperhive.agentreach import claude_install_dir
from hyperhive.errors import ConfigError
from hyperhive.repoacl import grant_repo
from hyperhive.sysusers import agent_user, chown_tree, ensure_user, traversal_problem

__all__ = [
    "build_isolation",
    "config_repos",
    "own_dirs",
    "readonly_paths",
    "retarget_isolation",
]


log = logging.getLogger(__name__)


def readonly_paths(claude_bin: str | None) -> tuple[Path, ...]:
    """Host paths every sandbox needs to read (outside the system dirs)."""
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(hyperhive.__file__).parents[1]}
    if claude_bin and "/" in claude_bin:
        paths.add(claude_install_dir(Path(claude_bin)))
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


def config_repos(spec: AgentSpec, uid: int | None) -> list[Path]:
    """The proposed config repos the agent may write: its own and its descendants'.

    With its own user (``uid``), each gets the agent's ACL entry: it edits its
    own and reads what its ancestors commit there, and edits its descendants'.
    """
    out = []
    for agent in (spec.name, *spec.descendants):
        repo = spec.paths.agent_config_repo(agent)
        if repo.exists():
            out.append(repo)
            if uid is not None:
                grant_repo(repo, uid)
    return out


def own_dirs(spec: AgentSpec) -> list[Path]:
    """The dirs an agent owns and writes: its state, home and workspace."""
    return [spec.state_dir, spec.paths.agent_home(spec.name), spec.paths.agent_work(spec.name)]


def retarget_isolation(spec: AgentSpec, iso: Isolation) -> Isolation:
    """``iso`` with the config repos its (changed) descendants call for, from the next spawn.

    A reparent moves repos into or out of an ancestor's reach without a
    restart; the ACLs on the moved repos are the coordinator's to set.
    """
    return replace(iso, rw=(*own_dirs(spec), *config_repos(spec, iso.uid)))


def build_isolation(spec: AgentSpec) -> tuple[Isolation, list[str]]:
    """The agent's sandbox: its user (created if missing), dirs it owns, limits."""
    notes: list[str] = []
    own = own_dirs(spec)
    problem = traversal_problem(spec.state_dir)
    ids = ensure_user(spec.paths, spec.name)
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
            spec.paths.agent_dir(spec.name),
            spec.paths.agent_dir(spec.name).parent,
            spec.paths.run,
            spec.runtime_dir.parent,
            spec.paths.agent_sock(spec.name).parent,
        ):
            parent.mkdir(parents=True, exist_ok=True)
            parent.chmod(0o711)
        for d in own:
            chown_tree(d, *ids)
        # The runtime dir stays root's (0711): the agent reads the files it is given
        # there but cannot swap them for links between the host's write and chown.
        spec.runtime_dir.chmod(0o711)
    rw = [*own, *config_repos(spec, ids[0] if ids else None)]
    cgroups, problems = prepare_cgroups(
        spec.name, spec.config.limits, unit=agent_user(spec.paths, spec.name)
    )
    notes.extend(f"limit not applied: {p}" for p in problems)
    existing = frozenset(
        p for p in (*SYSTEM_RO, *(link for link, _ in SYSTEM_LINKS)) if os.path.lexists(p)
    )
    iso = Isolation(
        agent=spec.name,
        uid=ids[0] if ids else None,
        gid=ids[1] if ids else None,
        rw=tuple(rw),
        ro=(*readonly_paths(spec.hive.claude_bin), spec.runtime_dir),
        sockets=(spec.paths.agent_sock(spec.name),),
        cgroups=cgroups,
        existing=existing,
    )
    for note in notes:
        log.warning("%s: %s", spec.name, note)
    return iso, notes
