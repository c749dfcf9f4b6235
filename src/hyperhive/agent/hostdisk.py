"""The host's side of the coordinator's work in agents' directories (#14: no shared disk).

Each agent's proposed config repo, state, home and workspace live on the
disk of the host that holds it, and its system user in that host's user
database. The coordinator asks (:mod:`hyperhive.protocol.hostdisk`; the
host's table, :mod:`.hostasks`, hands each ask to its method here); this
does it with the host's own git, ACL and user tools, on a worker thread
(git and useradd must not stall the host's event loop), one ask at a time
per agent. The mirrors it keeps of repos held on other hosts, for the
ancestors it runs, are in :mod:`hyperhive.agent.mirrorrepos`.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio

from hyperhive.agent.mirrorrepos import MirrorRepos
from hyperhive.atomic import atomic_write_text
from hyperhive.config import HivePaths
from hyperhive.errors import InvalidRequest, NotFound, StorageError
from hyperhive.gitrepo import AGENT_TOML, GitRepo
from hyperhive.protocol.hostdisk import (
    MAX_CONFIG,
    AgentTrashAsk,
    MirrorsKeepAsk,
    MirrorsKept,
    MirrorWriteAsk,
    RepoAclAsk,
    RepoFile,
    RepoShowAsk,
    ReposMissingAsk,
    RepoWriteAsk,
    RepoWritten,
    Trashed,
)
from hyperhive.protocol.hostreads import Ask
from hyperhive.repoacl import REPO_FILE_MODE, sync_repo
from hyperhive.sysusers import chown_tree, ensure_user, existing_uid, remove_user

__all__ = ["AgentDisk"]

log = logging.getLogger(__name__)

C = TypeVar("C")
R = TypeVar("R")


class AgentDisk:
    """Agents' directories on this host: proposed repos, their ACLs, trash, users."""

    def __init__(
        self,
        paths: HivePaths,
        host_id: str,
        isolated: bool,
        repos_changed: Callable[[list[str]], None] | None = None,
    ) -> None:
        self.paths = paths
        self.host_id = host_id
        # Told (on the event loop) of the agents whose config repo (or mirror) was made or
        # removed here, so the sandboxes of the agents running here that may write it
        # bind it, or no longer do.
        self.repos_changed = repos_changed
        # Under bubblewrap (as root) each proposed repo belongs to its agent's user.
        self.isolated = isolated and os.geteuid() == 0
        self.mirrors = MirrorRepos(paths, host_id, self.isolated)
        self._locks: dict[str, threading.Lock] = {}

    def _one(self, agent: str, fn: Callable[[C], R], cmd: C) -> R:
        """``fn(cmd)`` alone on ``agent``'s directories: asks run concurrently, and a
        read racing a first commit must not find (and restart) a half-made repo."""
        with self._locks.setdefault(agent, threading.Lock()):
            return fn(cmd)

    def _changed(self, agents: list[str]) -> None:
        if agents and self.repos_changed is not None:
            self.repos_changed(agents)

    async def _off_loop(self, ask: Ask[Any], fn: Callable[..., R], *args: Any) -> R:
        """``fn(*args)`` on a worker thread; an ``OSError`` (a full or read-only disk, say)
        is said, with the host's name and what was asked."""
        try:
            return await anyio.to_thread.run_sync(fn, *args)
        except OSError as exc:
            raise StorageError(
                f"agent host {self.host_id} could not do {ask.cmd}{ask.subject()}: {exc}"
            ) from exc

    # ---- the coordinator's asks (each a handler of the host's table) ---------------------

    async def write_repo(self, ask: RepoWriteAsk) -> RepoWritten:
        existed = self._real(ask.agent)
        written: RepoWritten = await self._off_loop(ask, self._one, ask.agent, self.write, ask)
        if not existed:
            self._changed([ask.agent])
        return written

    async def show_repo(self, ask: RepoShowAsk) -> RepoFile:
        shown: RepoFile = await self._off_loop(ask, self._one, ask.agent, self.show, ask)
        return shown

    async def missing_repos(self, ask: ReposMissingAsk) -> list[str]:
        return await self._off_loop(ask, self.missing, ask.agents)

    async def set_acls(self, ask: RepoAclAsk) -> None:
        await self._off_loop(ask, self.sync_acls, ask)

    async def trash_agent(self, ask: AgentTrashAsk) -> Trashed:
        trashed: Trashed = await self._off_loop(ask, self._one, ask.agent, self.trash, ask)
        return trashed

    async def keep_mirrors(self, ask: MirrorsKeepAsk) -> MirrorsKept:
        kept, gone = await self._off_loop(ask, self.mirrors.keep, ask)
        self._changed(gone)
        return kept

    async def write_mirror(self, ask: MirrorWriteAsk) -> RepoWritten:
        mirrored: RepoWritten
        made: bool
        mirrored, made = await self._off_loop(ask, self._one, ask.agent, self.mirrors.write, ask)
        if made:
            self._changed([ask.agent])
        return mirrored

    # ---- proposed config repos ---------------------------------------------------------

    def _real(self, agent: str) -> bool:
        """Whether ``agent``'s own proposed repo is here (a mirror of it is not)."""
        return (self.paths.agent_config_repo(agent) / ".git").exists() and not (
            self.mirrors.is_mirror(agent)
        )

    def proposed(self, agent: str) -> GitRepo:
        """``agent``'s proposed repo, made (and given to its user) if it is not yet."""
        path = self.paths.agent_config_repo(agent)
        owner = None
        if self.isolated:
            owner = ensure_user(self.paths, agent)
            if owner is not None:
                path.mkdir(parents=True, exist_ok=True)
                chown_tree(path, *owner)
        repo = GitRepo(path, run_as=owner)
        repo.ensure()
        return repo

    def _dirs_ready(self, agent: str) -> None:
        """The agent's private directories (state, home, work)."""
        for d in (
            self.paths.agent_state(agent),
            self.paths.agent_home(agent),
            self.paths.agent_work(agent),
        ):
            d.mkdir(parents=True, exist_ok=True, mode=0o700)

    def write(self, cmd: RepoWriteAsk) -> RepoWritten:
        if self.mirrors.is_mirror(cmd.agent):
            # Its directories are here now (the coordinator's word): the mirror makes way.
            self.mirrors.drop(cmd.agent, frozenset([cmd.agent]))
        self._dirs_ready(cmd.agent)
        existed = self._real(cmd.agent)
        repo = self.proposed(cmd.agent)
        if cmd.missing_only and existed:
            return RepoWritten(commit=repo.head(), changed=False)
        atomic_write_text(repo.path / AGENT_TOML, cmd.text, REPO_FILE_MODE)
        if repo.run_as is not None:
            os.chown(repo.path / AGENT_TOML, *repo.run_as, follow_symlinks=False)
        commit = repo.commit_file(cmd.message, AGENT_TOML, cmd.text)
        return RepoWritten(commit=commit or repo.head(), changed=commit is not None)

    def show(self, cmd: RepoShowAsk) -> RepoFile:
        label = (
            f"the mirror of {cmd.agent}'s config repo"
            if cmd.mirror
            else f"{cmd.agent}'s proposed config repo"
        )
        there = (self.paths.agent_config_repo(cmd.agent) / ".git").exists()
        if not there or self.mirrors.is_mirror(cmd.agent) != cmd.mirror:
            raise NotFound(
                f"agent host {self.host_id} keeps no mirror of {cmd.agent}'s config repo"
                if cmd.mirror
                else f"{cmd.agent} has no proposed config repo on agent host {self.host_id}"
            )
        owner = ensure_user(self.paths, cmd.agent) if self.isolated else None
        repo = GitRepo(self.paths.agent_config_repo(cmd.agent), run_as=owner)  # read only
        try:
            full = repo.resolve(cmd.commit)
        except NotFound as exc:
            raise NotFound(
                f"no commit {cmd.commit!r} in {label} on agent host {self.host_id}"
            ) from exc
        size = repo.size(full, cmd.path)
        if size is not None and size > MAX_CONFIG:
            raise InvalidRequest(
                f"{cmd.agent}'s {cmd.path} at {full[:12]} on agent host {self.host_id} is "
                f"{size} bytes, over the {MAX_CONFIG // 1024} KiB limit; make it smaller and "
                "commit again"
            )
        return RepoFile(commit=full, text=repo.show(full, cmd.path), subject=repo.subject(full))

    def missing(self, agents: list[str]) -> list[str]:
        return [a for a in agents if not self._real(a)]

    def sync_acls(self, cmd: RepoAclAsk) -> None:
        """Each repo writable by exactly its writers among the hive's users on this host
        (an ancestor on another host has no user here: it edits through its own host)."""
        if not self.isolated:
            return
        uids = {a: existing_uid(self.paths, a) for a in cmd.hive_agents}
        hive_uids = {u for u in uids.values() if u is not None}
        for entry in cmd.repos:
            repo = self.paths.agent_config_repo(entry.agent)
            if not repo.is_dir():
                continue
            wanted = {u for a in entry.writers if (u := uids.get(a)) is not None}
            sync_repo(repo, wanted, hive_uids)

    # ---- destroy -----------------------------------------------------------------------

    def trash(self, cmd: AgentTrashAsk) -> Trashed:
        """Move the agent's directories to ``agents/.trash`` and remove its user."""
        src = self.paths.agent_dir(cmd.agent)
        moved: Path | None = None
        if src.exists():
            moved = self.paths.home / "agents" / ".trash" / f"{cmd.agent}-{time.time_ns()}"
            moved.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            shutil.move(str(src), str(moved))
            log.info("moved destroyed agent %s's directories to %s", cmd.agent, moved)
        remove_user(self.paths, cmd.agent)
        return Trashed(moved_to=str(moved) if moved is not None else None)
