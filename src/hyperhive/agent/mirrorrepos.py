"""Mirrors of config repos held on other hosts, for the ancestors this host runs (#14).

An ancestor edits a descendant's proposed config at ``agents/<name>/config``
whatever host holds the descendant. When another host does, this host keeps
a *mirror* at that same path: a git repo the coordinator brings to the real
repo's head (``mirror_write``), which the ancestors here may write (ACL, as
on a real repo), and whose commits the coordinator reads back to commit in
the real one (``repo_show`` with ``mirror``). A mirror is told apart from an
agent's own directories by ``agents/<name>/mirror.json`` (the host's, not
writable by any agent), which records the real head it was last brought to.
Like a real repo it belongs to the agent's user (made here for it): git runs
as that user, never as root, in a repo agents can write.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

from hyperhive.atomic import atomic_write_text
from hyperhive.config import HivePaths
from hyperhive.errors import Conflict
from hyperhive.gitrepo import AGENT_TOML, GitRepo
from hyperhive.protocol.hostdisk import MirrorsKeepAsk, MirrorsKept, MirrorWriteAsk, RepoWritten
from hyperhive.repoacl import REPO_FILE_MODE, sync_repo
from hyperhive.sysusers import chown_tree, ensure_user, existing_uid, remove_user

__all__ = ["MARKER", "MirrorRepos"]

log = logging.getLogger(__name__)

MARKER = "mirror.json"


class MirrorRepos:
    """The mirrors on this host's disk: kept, written, pruned (on a worker thread)."""

    def __init__(self, paths: HivePaths, host_id: str, isolated: bool) -> None:
        self.paths = paths
        self.host_id = host_id
        self.isolated = isolated

    def _marker(self, agent: str) -> Path:
        return self.paths.agent_dir(agent) / MARKER

    def is_mirror(self, agent: str) -> bool:
        return self._marker(agent).is_file()

    def held(self) -> list[str]:
        """The agents this host keeps a mirror of."""
        root = self.paths.home / "agents"
        if not root.is_dir():
            return []
        return sorted(
            d.name for d in root.iterdir() if not d.name.startswith(".") and (d / MARKER).is_file()
        )

    def source(self, agent: str) -> str:
        """The real head the mirror was last brought to ("" while it is being made)."""
        try:
            return str(json.loads(self._marker(agent).read_text()).get("source", ""))
        except (OSError, ValueError):
            return ""

    def repo(self, agent: str) -> GitRepo:
        """The mirror's repo, as the agent's user (made here if need be)."""
        owner = ensure_user(self.paths, agent) if self.isolated else None
        return GitRepo(self.paths.agent_config_repo(agent), run_as=owner)

    def drop(self, agent: str, hive_agents: frozenset[str]) -> None:
        """Remove ``agent``'s mirror; a destroyed agent's user here goes with it."""
        shutil.rmtree(self.paths.agent_dir(agent))
        log.info("agent host %s: removed its mirror of %s's config repo", self.host_id, agent)
        if agent not in hive_agents:
            remove_user(self.paths, agent)

    # ---- the coordinator's asks ----------------------------------------------------------

    def keep(self, cmd: MirrorsKeepAsk) -> tuple[MirrorsKept, list[str]]:
        """Drop every mirror not in ``cmd``; bring the kept ones' ACLs to their writers.
        The kept mirrors' sources, and the agents whose mirror went."""
        wanted = {m.agent: m.writers for m in cmd.mirrors}
        hive = frozenset(cmd.hive_agents)
        gone = [a for a in self.held() if a not in wanted]
        for agent in gone:
            self.drop(agent, hive)
        uids = {a: existing_uid(self.paths, a) for a in hive} if self.isolated else {}
        hive_uids = {u for u in uids.values() if u is not None}
        sources: dict[str, str] = {}
        for agent, writers in wanted.items():
            if not self.is_mirror(agent):
                continue
            sources[agent] = self.source(agent)
            if self.isolated:
                # Its own user too, as on a real repo: it writes what the writers made.
                mine = {u for w in (agent, *writers) if (u := uids.get(w)) is not None}
                sync_repo(self.paths.agent_config_repo(agent), mine, hive_uids)
        return MirrorsKept(sources=sources), gone

    def write(self, cmd: MirrorWriteAsk) -> tuple[RepoWritten, bool]:
        """The mirror of ``cmd.agent`` at ``cmd.text`` (made if missing): what was
        committed, and whether the mirror is new."""
        agent_dir = self.paths.agent_dir(cmd.agent)
        made = not self.is_mirror(cmd.agent)
        if made and agent_dir.exists():
            raise Conflict(
                f"agent host {self.host_id} holds {cmd.agent}'s own directories, so it keeps "
                "no mirror of its config repo"
            )
        if made:
            agent_dir.mkdir(parents=True, mode=0o711)
            agent_dir.chmod(0o711)  # the writers reach config/, nothing else is here
            # Marked first: a write cut short leaves a mirror to finish, never a dir that
            # looks like the agent's own.
            atomic_write_text(self._marker(cmd.agent), json.dumps({"source": ""}), 0o600)
        repo = self.repo(cmd.agent)
        repo.path.mkdir(exist_ok=True)
        if repo.run_as is not None:
            chown_tree(repo.path, *repo.run_as)
        repo.ensure()
        atomic_write_text(repo.path / AGENT_TOML, cmd.text, REPO_FILE_MODE)
        if repo.run_as is not None:
            os.chown(repo.path / AGENT_TOML, *repo.run_as, follow_symlinks=False)
        commit = repo.commit_file(
            f"{cmd.agent}'s config on agent host {cmd.source_host} at {cmd.source[:12]}",
            AGENT_TOML,
            cmd.text,
        )
        if self.isolated:
            named = (cmd.agent, *cmd.writers)  # its own user too (see keep)
            writers = {u for w in named if (u := existing_uid(self.paths, w)) is not None}
            sync_repo(repo.path, writers, writers)  # grants only: keep revokes
        atomic_write_text(
            self._marker(cmd.agent),
            json.dumps({"source": cmd.source, "source_host": cmd.source_host}),
            0o600,
        )
        return RepoWritten(commit=commit or repo.head(), changed=commit is not None), made
