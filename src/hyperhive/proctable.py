"""One supervised process table: what bash tasks and subagents share.

An agent-host subsystem that starts processes for its agent (a
:class:`~hyperhive.bash.tasks.TaskManager`, a
:class:`~hyperhive.subagent.session.SubagentManager`) subclasses
:class:`ProcTable` and keeps only what is its own (argv, limits, the texts
the agent reads). The table gives it:

- **start**: an id claimed (a fresh one, or the caller's name once its last
  holder has ended), the entry installed and rolled back if the start fails;
- **status and wait**: each entry's ``ended`` event;
- **kill with a grace period**: SIGTERM to the process group, SIGKILL if it
  has not ended within ``kill_grace``;
- **output to a file**, opened beneath the agent's state dir without
  following links the agent may have planted;
- **durable state**: every record in one JSON file, written atomically; an
  unreadable file is moved aside (and said so), never a crash;
- **``interrupted`` after a crash**: entering the table marks every record a
  previous host left live as interrupted, SIGKILLing its process group first
  if that very process survived (pid *and* start time), and
  :meth:`ProcTable.report_recovered` files their todos once the owner is
  published;
- **a todo on completion**, filed and cleared here, a coordinator away for
  a while never losing the process itself.

Leaving the ``async with`` block cancels the runners, which stop their
process groups and leave the records as they are: the next host marks them
interrupted, so a clean stop and a crash end the same way.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, Protocol, Self, TypeVar, cast

import anyio
from anyio.abc import Process, TaskGroup
from pydantic import BaseModel, ValidationError

from hyperhive.agent.sandbox import process_identity, signal_group
from hyperhive.agent.todos import TodoSink
from hyperhive.errors import Conflict, NotFound, StorageError, Unavailable
from hyperhive.names import validate_task_name
from hyperhive.safefs import atomic_write_beneath, open_beneath

__all__ = ["Entry", "ProcRecord", "ProcTable", "TableFile", "output_file", "output_tail"]

log = logging.getLogger(__name__)


class ProcRecord(Protocol):
    """What the table reads of a persisted record (a pydantic model of its owner's)."""

    id: str
    pid: int | None
    identity: str | None  # process_identity at spawn: our process, not a reused pid


R = TypeVar("R", bound=ProcRecord)


@dataclass(eq=False)
class Entry(Generic[R]):
    """One record and the live handles of its run (none after a restart)."""

    record: R
    ended: anyio.Event = field(default_factory=anyio.Event)
    process: Process | None = None


E = TypeVar("E", bound=Entry[Any])


@dataclass(frozen=True)
class TableFile(Generic[R]):
    """Where a table is persisted: ``model`` (a version and a list under ``key``) in ``name``."""

    dir: Path  # beneath ``state_dir``; the processes' output files live here too
    name: str  # tasks.json, subagents.json
    model: type[BaseModel]
    key: str  # the list's key in the file: tasks, subagents

    @property
    def path(self) -> Path:
        return self.dir / self.name

    def decode(self, raw: bytes) -> list[R]:
        """The records in ``raw``; raises ValidationError on a corrupt file."""
        return cast("list[R]", getattr(self.model.model_validate_json(raw), self.key))

    def encode(self, records: list[R]) -> str:
        return self.model.model_validate({self.key: records}).model_dump_json()


def output_file(state_dir: Path, path: Path, *, append: bool = False) -> int:
    """A descriptor for a process's output file, opened without following planted links."""
    mode = os.O_APPEND if append else os.O_TRUNC
    return open_beneath(state_dir, path, os.O_WRONLY | os.O_CREAT | mode)


def output_tail(state_dir: Path, path: Path, nbytes: int) -> str:
    """The last ``nbytes`` of an output file, as text ("" before it exists)."""
    try:
        fd = open_beneath(state_dir, path, os.O_RDONLY, make_dirs=False)
    except StorageError as exc:
        if isinstance(exc.__cause__, FileNotFoundError):
            return ""
        return f"(output unreadable: {exc.message})"
    with os.fdopen(fd, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        fh.seek(max(0, size - nbytes))
        return fh.read(nbytes).decode("utf-8", errors="replace")


class ProcTable(ABC, Generic[R, E]):
    """One agent's supervised processes of one kind; ``async with`` runs them.

    ``noun`` names one in messages ("bash task", "subagent"); ``id_hint`` says
    where ids come from, after a "no such id".
    """

    noun: str = "process"
    id_hint: str = ""

    def __init__(
        self,
        state_dir: Path,
        file: TableFile[R],
        todos: TodoSink,
        *,
        kill_grace: float,
        history: int,
    ) -> None:
        self.state_dir = state_dir  # agent-writable: every access goes through safefs
        self.dir = file.dir
        self.table_path = file.path
        self._file = file
        self._todos = todos
        self._kill_grace = kill_grace
        self._history = history
        self._entries: dict[str, E] = {}  # insertion order = age
        self._persist_lock = anyio.Lock()
        self._tg: TaskGroup | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._recovered: list[E] = []  # todos report_recovered() still owes

    # ---- what a subclass says about its own records ------------------------

    @abstractmethod
    def _entry(self, record: R) -> E:
        """The entry of a record read back from the file."""

    @abstractmethod
    def _live(self, record: R) -> bool:
        """Whether the record says its process was pending or running."""

    @abstractmethod
    def _interrupt(self, record: R) -> None:
        """Mark a record a previous host left live as interrupted (its words)."""

    def _owes_todo(self, record: R) -> bool:
        """Whether an ended record's completion todo may not have reached the agent."""
        return False

    @abstractmethod
    async def _completion_todo(self, entry: E) -> None:
        """File ``entry``'s completion todo (after a restart, too)."""

    # ---- lifecycle ---------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._stack is not None:
            raise RuntimeError(f"this {type(self).__name__} is already running")
        await self._recover()
        async with contextlib.AsyncExitStack() as stack:
            self._tg = await stack.enter_async_context(anyio.create_task_group())
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        stack, tg = self._stack, self._tg
        assert stack is not None and tg is not None
        self._stack = self._tg = None
        # Runners stop their process groups on cancellation and leave records as they are.
        tg.cancel_scope.cancel()
        return await stack.__aexit__(exc_type, exc, tb)

    def _group(self) -> TaskGroup:
        if self._tg is None:
            raise Unavailable(f"{self.noun}s are not available (agent host starting or stopping)")
        return self._tg

    # ---- start -------------------------------------------------------------

    def _claim(self, name: str | None, *, id_bytes: int, busy: str) -> str:
        """A fresh id, or ``name`` once its last holder has ended (``busy``: what to do)."""
        if name is None:
            while (fresh := secrets.token_hex(id_bytes)) in self._entries:
                pass
            return fresh
        claimed = validate_task_name(name)
        old = self._entries.get(claimed)
        if old is not None and not old.ended.is_set():
            raise Conflict(f"{self.noun} {claimed!r} is still running; {busy}")
        return claimed

    def _install(self, entry: E) -> E | None:
        """Make ``entry`` the newest under its id; returns the one it replaces."""
        previous = self._entries.pop(entry.record.id, None)
        self._entries[entry.record.id] = entry
        return previous

    def _uninstall(self, entry: E, previous: E | None) -> None:
        """Undo :meth:`_install` after a start that failed."""
        del self._entries[entry.record.id]
        if previous is not None:
            self._entries[entry.record.id] = previous

    @staticmethod
    def _spawned(entry: Entry[Any], process: Process) -> None:
        """Record ``entry``'s new process, so a host that crashes kills it on restart."""
        entry.process = process
        entry.record.pid, entry.record.identity = process.pid, process_identity(process.pid)

    def _prune(self) -> None:
        ended = [k for k, e in self._entries.items() if e.ended.is_set()]
        for key in ended[: max(0, len(ended) - self._history)]:
            del self._entries[key]

    # ---- status and wait ---------------------------------------------------

    def _get(self, key: str) -> E:
        entry = self._entries.get(key)
        if entry is None:
            recent = ", ".join(list(self._entries)[-5:]) or "none yet"
            raise NotFound(
                f"no {self.noun} {key!r} on this agent{self.id_hint} (most recent: {recent})"
            )
        return entry

    @staticmethod
    async def _wait(entry: Entry[Any], seconds: float) -> bool:
        """Wait up to ``seconds`` for ``entry`` to end; whether it has."""
        if seconds > 0 and not entry.ended.is_set():
            with anyio.move_on_after(seconds):
                await entry.ended.wait()
        return entry.ended.is_set()

    # ---- kill with a grace period ------------------------------------------

    async def _terminate(self, process: Process | int, ended: Callable[[], Awaitable[Any]]) -> bool:
        """SIGTERM the group; SIGKILL it unless ``ended`` returns within the grace.

        Returns whether it ended in time.
        """
        if not signal_group(process, signal.SIGTERM):
            return True
        with anyio.move_on_after(self._kill_grace):
            await ended()
            return True
        signal_group(process, signal.SIGKILL)
        return False

    # ---- durable state -----------------------------------------------------

    def _load(self) -> list[R]:
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            raw = self.table_path.read_bytes()
        except FileNotFoundError:
            return []
        try:
            return self._file.decode(raw)
        except ValidationError as exc:
            aside = self.table_path.with_name(f"{self._file.name}.corrupt-{time.time_ns()}")
            os.replace(self.table_path, aside)
            log.warning(
                "%s table %s is unreadable (%s); moved it to %s and started with an empty "
                "table. The %ss it listed are forgotten (their output stays in %s); inspect "
                "the copy, then delete it.",
                self.noun,
                self.table_path,
                exc.errors()[0]["msg"] if exc.errors() else exc,
                aside,
                self.noun,
                self.dir,
            )
            return []

    async def _persist(self) -> None:
        async with self._persist_lock:
            # Snapshot under the lock: the last write always holds the latest state.
            text = self._file.encode([e.record for e in self._entries.values()])
            await anyio.to_thread.run_sync(
                atomic_write_beneath, self.state_dir, self.table_path, text.encode()
            )

    async def _persist_quietly(self) -> None:
        # A full disk must not take a runner (and with it every other process) down.
        try:
            await self._persist()
        except StorageError as exc:
            log.warning("%ss: %s; the table is stale until the next write", self.noun, exc)

    # ---- interrupted after a crash -----------------------------------------

    async def _recover(self) -> None:
        records = await anyio.to_thread.run_sync(self._load)
        interrupted: list[E] = []
        unsynced: list[E] = []
        for rec in records:
            entry = self._entry(rec)
            self._entries[rec.id] = entry
            if self._live(rec):
                if rec.pid and rec.identity and process_identity(rec.pid) == rec.identity:
                    signal_group(rec.pid, signal.SIGKILL)  # not ours to watch: no exit code
                self._interrupt(rec)
                interrupted.append(entry)
            elif self._owes_todo(rec):
                unsynced.append(entry)  # died before its completion todo went out
            entry.ended.set()
        if interrupted:
            await self._persist()
        self._recovered = interrupted + unsynced

    async def report_recovered(self) -> None:
        """File the todos a previous host left owing (call once the owner is published:
        a todo wakes a turn whose status call must find this table)."""
        owed, self._recovered = self._recovered, []
        for entry in owed:
            await self._completion_todo(entry)

    # ---- todos -------------------------------------------------------------

    async def _file_todo(self, key: str, body: str, *, wake: bool = True) -> bool:
        """Upsert a todo; whether it reached the coordinator."""
        try:
            await self._todos.upsert(key, body, wake=wake)
        except Exception:  # the coordinator being away must not lose the process itself
            log.warning("could not file the todo %s of a %s", key, self.noun, exc_info=True)
            return False
        return True

    async def _drop_todo(self, key: str) -> bool:
        """Clear a todo; whether it reached the coordinator."""
        try:
            await self._todos.clear(key)
        except Exception:
            log.warning("could not clear the todo %s of a %s", key, self.noun, exc_info=True)
            return False
        return True
