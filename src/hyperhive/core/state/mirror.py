"""``meta/``: a git mirror of the store's deploy log, and adopting an older home.

The store is the truth for the topology, each agent's applied config and the
deploy log (so a standby coordinator, with a home of its own, has them). The
meta repo is written from the store's log for people and tools that read git:
one commit per logged change (the entries logged with one message: a spawn's
tree and config, or an adoption's every config), ``topology.json``,
``agents/<name>.toml`` and ``inputs.toml`` as files. Git runs on a worker
thread, never on the event loop and never inside a store transaction. How far
the mirror got is kept in its ``.git`` (not in the work tree), so an export
cut short is repeated, and a repeat whose files are already there commits
nothing.

A home from before the store held this state has it only in those files:
:meth:`MetaMirror.adopt` moves them into the store once, losing nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import anyio

from hyperhive.atomic import atomic_write_text
from hyperhive.config import HivePaths
from hyperhive.errors import HiveError, InvalidName
from hyperhive.gitrepo import GitRepo
from hyperhive.names import validate_agent_name
from hyperhive.store.base import MetaLogRepo
from hyperhive.store.rows import DeployEntry
from hyperhive.topology import read_topology_file

__all__ = ["INPUTS", "TOPOLOGY", "MetaMirror", "render_topology", "runs_of_one_change"]

log = logging.getLogger(__name__)

TOPOLOGY = "topology.json"
INPUTS = "inputs.toml"
_SEQ_FILE = "hyperhive-mirror-seq"  # inside .git: never part of a commit
_SEQ_TRAILER = "Deploy-Seq"


def render_topology(tree: Mapping[str, str | None]) -> str:
    return json.dumps(dict(sorted(tree.items())), indent=2) + "\n"


class MetaMirror:
    def __init__(self, paths: HivePaths, repo: MetaLogRepo) -> None:
        self.paths = paths
        self.git = GitRepo(paths.meta)
        self._log = repo
        self._lock = anyio.Lock()
        self._seq: int | None = None

    # ---- adopting an older home ----------------------------------------------------

    async def adopt(self) -> list[DeployEntry]:
        """Move an older home's ``meta/`` files into an empty store log (once).

        Nothing happens if the store's log has any entry: then the store is the
        truth and the files are its mirror.
        """
        if await self._log.log(limit=1):
            return []  # read no file: its warnings would be about a mirror, not the hive
        configs, tree, inputs = await anyio.to_thread.run_sync(self._read_files)
        if not configs and tree is None and inputs is None:
            return []
        message = f"adopt {self.paths.meta} into the store"
        entries = await self._log.adopt(configs, tree, message)
        if entries and inputs is not None:
            entries.append(await self._log.note("inputs", None, message, text=inputs))
        if entries:
            log.info(
                "adopted %d applied configs and the tree from %s", len(configs), self.paths.meta
            )
        return entries

    def _read_files(self) -> tuple[dict[str, str], dict[str, str | None] | None, str | None]:
        configs: dict[str, str] = {}
        folder = self.paths.meta / "agents"
        for path in sorted(folder.glob("*.toml")) if folder.is_dir() else ():
            try:
                validate_agent_name(path.stem)
            except InvalidName as exc:
                log.warning("not adopting %s: %s", path, exc.message)
                continue
            try:
                configs[path.stem] = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                # Adopted as an unreadable config: the agent stays known, marked broken.
                log.error("cannot read %s (%s); adopting it as a broken config", path, exc)
                configs[path.stem] = f"# {path} could not be read when it was adopted: {exc}\n!"
        topo_path = self.paths.meta / TOPOLOGY
        tree = read_topology_file(topo_path) if topo_path.exists() else None
        inputs_path = self.paths.meta / INPUTS
        inputs = inputs_path.read_text(encoding="utf-8") if inputs_path.is_file() else None
        return configs, tree, inputs

    # ---- exporting -------------------------------------------------------------------

    def ensure(self) -> None:
        self.git.ensure()

    async def sync(self) -> str | None:
        """Export every entry the mirror lacks, a commit each; the HEAD after.

        ``None`` if git failed (a full disk, say): the change is in the store
        all the same, and the next sync or start catches the mirror up.
        """
        async with self._lock:
            try:
                if self._seq is None:
                    self._seq = await anyio.to_thread.run_sync(self._read_seq)
                while entries := await self._log.since(self._seq):
                    self._seq = await anyio.to_thread.run_sync(self._export, entries)
                return await anyio.to_thread.run_sync(self.git.head)
            except (HiveError, OSError) as exc:
                self._seq = None  # re-read: the export may have got further than we know
                log.error(
                    "the meta repo %s is behind the store (%s); it catches up at the next "
                    "change or start",
                    self.paths.meta,
                    exc,
                )
                return None

    async def restore(self, configs: Mapping[str, str], tree: Mapping[str, str | None]) -> None:
        """Make the work tree show the store's state (undoing hand edits), one commit."""
        async with self._lock:
            try:
                await anyio.to_thread.run_sync(self._restore, dict(configs), dict(tree))
            except (HiveError, OSError) as exc:
                log.error(
                    "cannot rewrite the meta repo %s from the store: %s", self.paths.meta, exc
                )

    def _read_seq(self) -> int:
        try:
            return int((self.paths.meta / ".git" / _SEQ_FILE).read_text().strip() or 0)
        except FileNotFoundError:
            return 0
        except ValueError:
            log.warning("%s is unreadable; re-exporting the whole deploy log", _SEQ_FILE)
            return 0

    def _export(self, entries: Sequence[DeployEntry]) -> int:
        """Export ``entries``: one commit per run of entries logged as one change (one
        message: an adoption of a thousand configs, a spawn's tree and config), so a
        backlog costs a few git commits, not one per entry."""
        seq = 0
        for run in runs_of_one_change(entries):
            written: list[str] = []
            for entry in run:
                written += [p for p in self._write_entry(entry) if p not in written]
            if written:
                self.git.commit(_commit_message(run), written)
            seq = run[-1].seq
            # After the commit: an export cut short between the two repeats the run, and
            # a repeat whose files are already there commits nothing.
            atomic_write_text(self.paths.meta / ".git" / _SEQ_FILE, f"{seq}\n")
        return seq

    def _write_entry(self, entry: DeployEntry) -> list[str]:
        """Write what ``entry`` changed; the repo paths it touched."""
        meta = self.paths.meta
        if entry.topology is not None:
            atomic_write_text(meta / TOPOLOGY, render_topology(entry.topology))
            return [TOPOLOGY]
        if entry.action == "inputs":
            if entry.config is None:
                return []
            atomic_write_text(meta / INPUTS, entry.config)
            return [INPUTS]
        if entry.agent is None or not _valid(entry.agent):
            return []
        rel = f"agents/{entry.agent}.toml"
        if entry.action == "remove":
            (meta / rel).unlink(missing_ok=True)
            return [rel]
        if entry.config is None:
            return []
        (meta / "agents").mkdir(parents=True, exist_ok=True)
        atomic_write_text(meta / rel, entry.config)
        return [rel]

    def _restore(self, configs: dict[str, str], tree: dict[str, str | None]) -> None:
        meta = self.paths.meta
        (meta / "agents").mkdir(parents=True, exist_ok=True)
        touched = [TOPOLOGY, "agents"]
        if _differs(meta / TOPOLOGY, render_topology(tree)):
            atomic_write_text(meta / TOPOLOGY, render_topology(tree))
        wanted = {f"{name}.toml": text for name, text in configs.items() if _valid(name)}
        for path in _files(meta / "agents"):
            if path.name not in wanted:
                path.unlink()
        for name, text in wanted.items():
            if _differs(meta / "agents" / name, text):
                atomic_write_text(meta / "agents" / name, text)
        self.git.commit("mirror: rewritten from the store", touched)


def runs_of_one_change(entries: Sequence[DeployEntry]) -> list[list[DeployEntry]]:
    """Consecutive entries with one message, in order (each run is one git commit)."""
    runs: list[list[DeployEntry]] = []
    for entry in entries:
        if runs and runs[-1][-1].message == entry.message:
            runs[-1].append(entry)
        else:
            runs.append([entry])
    return runs


def _commit_message(run: Sequence[DeployEntry]) -> str:
    if len(run) == 1:
        return f"{run[0].message}\n\n{_SEQ_TRAILER}: {run[0].seq}\n"
    return (
        f"{run[0].message}\n\n{len(run)} deploy log entries, seq {run[0].seq} to "
        f"{run[-1].seq}\n\n{_SEQ_TRAILER}: {run[-1].seq}\n"
    )


def _valid(name: str) -> bool:
    try:
        validate_agent_name(name)
    except InvalidName:
        return False
    return True


def _differs(path: Path, text: str) -> bool:
    try:
        return path.read_text(encoding="utf-8") != text
    except (OSError, UnicodeDecodeError):
        return True


def _files(folder: Path) -> Iterable[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else ()
