"""Background bash tasks (spec 001): run, status, kill, and survive restarts.

One :class:`TaskManager` per agent. A task is ``bash -c cmd`` started through
the agent's :class:`~hyperhive.agent.sandbox.AgentSandbox`, in its own process
group, in the agent's workspace. Its stdout and stderr are file descriptors
of ``<state>/harness/bash-tasks/<id>.out|.err`` handed to the child: output
never passes through this process, so a task printing gigabytes costs the
host no memory. ``status`` reads the last 4 KiB back from those files.

Every state change is written atomically to ``tasks.json`` beside them.

``kill`` signals the whole group; once the shell has exited, whatever it left
in its group (``cmd &`` children, which bash -c starts ignoring SIGINT) gets
SIGTERM, then SIGKILL after a grace: a killed task means all of it.

Restarts: a manager never adopts a process it did not start in this life.
Leaving its ``async with`` block kills the process groups of its live tasks
(SIGTERM, then SIGKILL after a grace) and leaves their records ``running``;
entering it marks every record still ``pending``/``running`` as
``interrupted`` — SIGKILLing the group first if a crash left that very process
alive (checked by pid *and* start time); ``report_recovered`` then surfaces a
todo for each, once the owner has published the manager (a todo wakes a turn
whose ``status`` call must find it). A clean
stop and a crash thus end the same way, as bubblewrap's ``--die-with-parent``
will make them.

Todos: one per task, key = task id: "running" once ``run``'s wait window has
passed with the task still going, the completion summary at the end, cleared
by any ``run``/``status`` that observes the end. A task that ends inside the
window files no todo at all (spec 001): its result is the answer, and a todo
would wake the agent a turn later for nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import anyio
from anyio.abc import Process, TaskGroup
from pydantic import ValidationError

from hyperhive.agent.activity import ActivitySink, Phase
from hyperhive.agent.sandbox import AgentSandbox, process_identity, signal_group
from hyperhive.agent.todos import TodoSink
from hyperhive.bash.records import (
    MAX_TIMEOUT_SECS,
    TAIL_BYTES,
    TERMINAL,
    WAIT_CAP_SECS,
    KillOutcome,
    TaskRecord,
    TaskReport,
    TaskStarted,
    TaskStatus,
    TaskTable,
    check_cmd,
    check_timeout,
    check_wait,
    duration,
    preview,
    summary,
)
from hyperhive.errors import Conflict, NotFound, StorageError, Unavailable
from hyperhive.names import validate_task_name
from hyperhive.safefs import atomic_write_beneath, open_beneath

# The record types are re-exported: callers think of them as the manager's answers.
__all__ = [
    "MAX_TIMEOUT_SECS",
    "TAIL_BYTES",
    "TASKS_SUBDIR",
    "TERMINAL",
    "WAIT_CAP_SECS",
    "KillOutcome",
    "TaskManager",
    "TaskRecord",
    "TaskReport",
    "TaskStarted",
    "TaskStatus",
    "TodoSink",
    "summary",
]

log = logging.getLogger(__name__)

TASKS_SUBDIR = Path("harness") / "bash-tasks"


@dataclass(eq=False)
class _Entry:
    record: TaskRecord
    settled: anyio.Event = field(default_factory=anyio.Event)  # ended and end todo sent
    start_scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    process: Process | None = None
    kill_requested: bool = False
    force: bool = False
    todo_cleared: bool = False
    # run() is still waiting inline: the runner files no todo, the caller gets the result.
    inline: bool = False
    # The feed was told it started; a task that ends inline is told once, as "ran".
    start_reported: bool = False
    # Serialises the "running" todo (filed by run()) with the completion one (the runner).
    todo_lock: anyio.Lock = field(default_factory=anyio.Lock)


def _tail(root: Path, path: Path) -> str:
    try:
        fd = open_beneath(root, path, os.O_RDONLY, make_dirs=False)
    except StorageError as exc:
        if isinstance(exc.__cause__, FileNotFoundError):
            return ""
        return f"(output unreadable: {exc.message})"
    with os.fdopen(fd, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        fh.seek(max(0, size - TAIL_BYTES))
        return fh.read(TAIL_BYTES).decode("utf-8", errors="replace")


class TaskManager:
    """One agent's background bash tasks; use as ``async with TaskManager(...) as tm``.

    ``max_running`` tasks run at once; later ones wait as ``pending``.
    ``kill_grace`` is how long a timed-out (or shut-down) task gets between
    SIGTERM and SIGKILL. ``history`` bounds how many finished tasks the table keeps.
    ``sandbox`` may be a function called per task: the agent's env (its parent after
    a reparent, a new login) is then read when the task starts, not when the host did.
    """

    def __init__(
        self,
        sandbox: AgentSandbox | Callable[[], AgentSandbox],
        state_dir: Path,
        todos: TodoSink,
        *,
        activity: ActivitySink | None = None,
        max_running: int = 32,
        kill_grace: float = 5.0,
        history: int = 1000,
    ) -> None:
        self._sandbox = sandbox if callable(sandbox) else (lambda: sandbox)
        self.state_dir = state_dir  # agent-writable: every access goes through safefs
        self.dir = state_dir / TASKS_SUBDIR
        self.table_path = self.dir / "tasks.json"
        self._todos = todos
        self._activity = activity
        self._kill_grace = kill_grace
        self._history = history
        self._entries: dict[str, _Entry] = {}  # insertion order = age
        self._slots = anyio.Semaphore(max_running)
        self._persist_lock = anyio.Lock()
        self._tg: TaskGroup | None = None
        self._recovered: list[_Entry] = []  # todos report_recovered() still owes

    # ---- lifecycle ---------------------------------------------------------

    async def __aenter__(self) -> TaskManager:
        if self._tg is not None:
            raise RuntimeError("this TaskManager is already running")
        await self._recover()
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        tg, self._tg = self._tg, None
        assert tg is not None
        # Runners kill their process groups on cancellation and leave records as they are.
        tg.cancel_scope.cancel()
        return await tg.__aexit__(exc_type, exc, tb)

    def _running_group(self) -> TaskGroup:
        if self._tg is None:
            raise Unavailable("the bash task manager is not running (agent host stopping?)")
        return self._tg

    def paths(self, task_id: str) -> tuple[Path, Path]:
        """The stdout and stderr files of a task."""
        return self.dir / f"{task_id}.out", self.dir / f"{task_id}.err"

    # ---- the three tools ---------------------------------------------------

    async def run(
        self,
        cmd: str,
        timeout_secs: float | None = None,
        wait_seconds: float = 3,
        name: str | None = None,
    ) -> TaskStarted | TaskReport:
        """Start ``bash -c cmd``; return its report if it ends within ``wait_seconds``."""
        self._running_group()
        cmd = check_cmd(cmd)
        timeout = check_timeout(timeout_secs)
        wait = check_wait(wait_seconds)
        if name is None:
            task_id = self._fresh_id()
        else:
            task_id = validate_task_name(name)
            old = self._entries.get(task_id)
            if old is not None and not old.settled.is_set():
                raise Conflict(
                    f"task {task_id!r} is still {old.record.status}; a name is reusable once "
                    f"its task has finished: wait for it, kill({task_id!r}), or pick another name"
                )
        entry = _Entry(
            TaskRecord(id=task_id, cmd=cmd, created_at=time.time(), timeout_secs=timeout)
        )
        previous = self._entries.pop(task_id, None)
        self._entries[task_id] = entry
        self._prune()
        try:
            await self._persist()
        except StorageError:
            del self._entries[task_id]
            if previous is not None:
                self._entries[task_id] = previous
            raise
        entry.inline = wait > 0
        self._running_group().start_soon(self._supervise, entry, name=f"bash task {task_id}")
        try:
            if wait > 0:
                with anyio.move_on_after(wait):
                    await entry.settled.wait()
            async with entry.todo_lock:
                entry.inline = False
                if entry.settled.is_set():
                    entry.todo_cleared = True  # none was filed: nothing for status() to clear
                    return self._report(entry)
                await self._report_started(entry)
                # Past the window: from here on the task is a loose end the agent may forget.
                # Listed, not waking: this very turn started it; its completion wakes.
                rec = entry.record
                # "pending" with a free slot only means its runner has not been scheduled yet.
                queued = rec.status == "pending" and self._slots.value == 0
                state = "queued for a free slot" if queued else "running"
                await self._upsert(
                    entry, f"bash task {rec.id} {state}: {preview(rec.cmd)}", wake=False
                )
        except BaseException:
            if entry.inline:
                # The call was cut off (client gone) inside its window — or just after the
                # task ended, on the lock: nobody will read an inline result, so the task
                # goes back to being a loose end with a todo that wakes.
                with anyio.CancelScope(shield=True):
                    await self._abandon_inline(entry)
            raise
        out, err = self.paths(task_id)
        return TaskStarted(task_id, out, err)

    async def _abandon_inline(self, entry: _Entry) -> None:
        async with entry.todo_lock:
            entry.inline = False
            rec = entry.record
            if entry.settled.is_set():
                rec.todo_synced = False  # _finish took it as reported inline
                await self._upsert(entry, summary(rec, *self.paths(rec.id)))
            else:
                await self._report_started(entry)
                await self._upsert(entry, f"bash task {rec.id} running: {preview(rec.cmd)}")

    def running_count(self) -> int:
        """Tasks whose process runs right now (the host's metrics; pending ones wait)."""
        return sum(1 for e in self._entries.values() if e.record.status == "running")

    async def status(self, task_id: str, wait_seconds: float = 0) -> TaskReport:
        """Report a task, waiting up to ``wait_seconds`` for it to end."""
        entry = self._get(task_id)
        wait = check_wait(wait_seconds)
        if wait > 0 and not entry.settled.is_set():
            with anyio.move_on_after(wait):
                await entry.settled.wait()
        if entry.record.status in TERMINAL:
            await entry.settled.wait()  # so the clear lands after the completion upsert
            await self._clear_todo(entry)
        return self._report(entry)

    async def kill(self, task_id: str, force: bool = False) -> KillOutcome:
        """SIGINT (``force``: SIGKILL) the task's process group; cancel it if pending."""
        entry = self._get(task_id)
        process = entry.process
        if entry.record.status in TERMINAL or (process and process.returncode is not None):
            return "already_finished"
        entry.kill_requested = True
        entry.force = entry.force or force
        if process is None:
            entry.start_scope.cancel()  # no effect once spawning began; the runner checks the flag
            return "cancelled"
        signal_group(process, signal.SIGKILL if force else signal.SIGINT)
        return "signalled"

    # ---- running one task --------------------------------------------------

    async def _supervise(self, entry: _Entry) -> None:
        with entry.start_scope:
            await self._slots.acquire()
        if entry.start_scope.cancelled_caught:
            await self._finish(entry, "killed")
            return
        try:
            if entry.kill_requested:
                await self._finish(entry, "killed")
            else:
                await self._execute(entry)
        finally:
            self._slots.release()

    async def _execute(self, entry: _Entry) -> None:
        rec = entry.record
        out, err = self.paths(rec.id)
        try:
            with contextlib.ExitStack() as fds:
                # The child gets the files themselves: no pipe, no copy loop, no buffer here.
                # Beneath the state dir without following links the agent may have planted.
                wflags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                out_fd = open_beneath(self.state_dir, out, wflags)
                fds.callback(os.close, out_fd)
                err_fd = open_beneath(self.state_dir, err, wflags)
                fds.callback(os.close, err_fd)
                process = await self._sandbox().open_process(
                    ["bash", "-c", rec.cmd],
                    stdin=subprocess.DEVNULL,
                    stdout=out_fd,
                    stderr=err_fd,
                )
        except (OSError, StorageError) as exc:
            rec.error = f"could not start the task: {exc}"
            await self._finish(entry, "done")
            return
        entry.process = process
        rec.status, rec.started_at = "running", time.time()
        rec.pid, rec.identity = process.pid, process_identity(process.pid)
        if not entry.inline:  # run() still waiting: it reports the start if the window ends
            await self._report_started(entry)
        if entry.kill_requested:  # kill() came while spawning
            signal_group(process, signal.SIGKILL if entry.force else signal.SIGINT)
        try:
            await self._persist_quietly()
            with anyio.move_on_after(rec.timeout_secs) as deadline:
                await process.wait()
            timed_out = deadline.cancelled_caught
            if timed_out:
                await self._terminate(process)
            elif entry.kill_requested:
                await self._sweep(process.pid, entry.force)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._terminate(process)
                await process.aclose()
            raise
        await process.aclose()
        rec.exit_code = process.returncode
        await self._finish(
            entry, "timed_out" if timed_out else "killed" if entry.kill_requested else "done"
        )

    async def _terminate(self, process: Process) -> None:
        signal_group(process, signal.SIGTERM)
        with anyio.move_on_after(self._kill_grace):
            await process.wait()
        # Also reaches children that outlived the shell or ignored SIGTERM.
        signal_group(process, signal.SIGKILL)
        await process.wait()

    async def _sweep(self, pgid: int, force: bool) -> None:
        if force:
            signal_group(pgid, signal.SIGKILL)
            return
        if not signal_group(pgid, signal.SIGTERM):
            return
        with anyio.move_on_after(self._kill_grace):
            while signal_group(pgid, 0):  # noqa: ASYNC110 - orphans are no child of ours to wait on
                await anyio.sleep(0.05)
        signal_group(pgid, signal.SIGKILL)

    async def _report_started(self, entry: _Entry) -> None:
        """Tell the feed a task runs, once, and only once its process exists."""
        if self._activity is None or entry.start_reported or entry.record.status != "running":
            return
        entry.start_reported = True
        await self._activity.report("started", entry.record.id, preview(entry.record.cmd))

    async def _finish(self, entry: _Entry, status: TaskStatus) -> None:
        rec = entry.record
        async with entry.todo_lock:
            # Ended inside run()'s window: one "ran" event, no started/finished pair.
            phase: Phase = "ran" if entry.inline else "finished"
            rec.status, rec.ended_at = status, time.time()
            # Reported inline by run(): no todo, and none to re-file after a restart.
            rec.todo_synced = rec.todo_synced or entry.inline
            try:
                await self._persist_quietly()
                if not entry.inline:
                    await self._upsert(entry, summary(rec, *self.paths(rec.id)))
            finally:
                entry.settled.set()
        if self._activity is not None:
            await self._activity.report(
                phase, rec.id, preview(rec.cmd), status=status, exit_code=rec.exit_code
            )

    # ---- table, todos, restart ---------------------------------------------

    async def _recover(self) -> None:
        records = await anyio.to_thread.run_sync(self._load)
        interrupted: list[_Entry] = []
        unsynced: list[_Entry] = []
        for rec in records:
            entry = _Entry(rec)
            self._entries[rec.id] = entry
            if rec.status in TERMINAL:
                if not rec.todo_synced:
                    unsynced.append(entry)  # died before its completion todo went out
                entry.settled.set()
                continue
            if rec.pid and rec.identity and process_identity(rec.pid) == rec.identity:
                signal_group(rec.pid, signal.SIGKILL)  # not ours to watch: no exit code, no waiting
            rec.status = "interrupted"
            rec.error = "the agent host stopped while this task was pending or running"
            interrupted.append(entry)
        if interrupted:
            await self._persist()
        for entry in interrupted:
            entry.settled.set()
        self._recovered = interrupted + unsynced

    async def report_recovered(self) -> None:
        """File the todos of the tasks a previous host left behind (call once published)."""
        owed, self._recovered = self._recovered, []
        for entry in owed:
            await self._upsert(entry, summary(entry.record, *self.paths(entry.record.id)))

    def _load(self) -> list[TaskRecord]:
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            raw = self.table_path.read_bytes()
        except FileNotFoundError:
            return []
        try:
            return TaskTable.model_validate_json(raw).tasks
        except ValidationError as exc:
            aside = self.table_path.with_name(f"tasks.json.corrupt-{time.time_ns()}")
            os.replace(self.table_path, aside)
            log.warning(
                "bash task table %s is unreadable (%s); moved it to %s and started with an "
                "empty table. The tasks it listed are forgotten (their output stays in %s); "
                "inspect the copy, then delete it.",
                self.table_path,
                exc.errors()[0]["msg"] if exc.errors() else exc,
                aside,
                self.dir,
            )
            return []

    async def _persist(self) -> None:
        async with self._persist_lock:
            # Snapshot under the lock: the last write always holds the latest state.
            text = TaskTable(tasks=[e.record for e in self._entries.values()]).model_dump_json()
            await anyio.to_thread.run_sync(
                atomic_write_beneath, self.state_dir, self.table_path, text.encode()
            )

    async def _persist_quietly(self) -> None:
        # A full disk must not kill the manager (and every other task) from a runner.
        try:
            await self._persist()
        except StorageError as exc:
            log.warning("bash tasks: %s; the task table is stale until the next write", exc)

    def _prune(self) -> None:
        finished = [k for k, e in self._entries.items() if e.settled.is_set()]
        for key in finished[: max(0, len(finished) - self._history)]:
            del self._entries[key]

    async def _upsert(self, entry: _Entry, body: str, *, wake: bool = True) -> None:
        entry.todo_cleared = False
        try:
            await self._todos.upsert(entry.record.id, body, wake=wake)
        except Exception:  # the coordinator being away must not lose the task itself
            log.warning("could not upsert the todo of bash task %s", entry.record.id, exc_info=True)
            return
        if entry.record.status in TERMINAL and not entry.record.todo_synced:
            entry.record.todo_synced = True
            await self._persist_quietly()

    async def _clear_todo(self, entry: _Entry) -> None:
        if entry.todo_cleared:
            return
        entry.todo_cleared = True
        try:
            await self._todos.clear(entry.record.id)
        except Exception:
            entry.todo_cleared = False
            log.warning("could not clear the todo of bash task %s", entry.record.id, exc_info=True)
            return
        if entry.record.status in TERMINAL and not entry.record.todo_synced:
            entry.record.todo_synced = True
            await self._persist_quietly()

    def _fresh_id(self) -> str:
        while (task_id := secrets.token_hex(5)) in self._entries:
            pass
        return task_id

    def _get(self, task_id: str) -> _Entry:
        entry = self._entries.get(task_id)
        if entry is None:
            recent = ", ".join(list(self._entries)[-5:]) or "none yet"
            raise NotFound(
                f"no bash task {task_id!r} on this agent; ids come from run() "
                f"(most recent: {recent})"
            )
        return entry

    def _report(self, entry: _Entry) -> TaskReport:
        rec = entry.record
        out, err = self.paths(rec.id)
        return TaskReport(
            id=rec.id,
            cmd=rec.cmd,
            status=rec.status,
            exit_code=rec.exit_code,
            duration_secs=duration(rec, time.time()),
            stdout_tail=_tail(self.state_dir, out),
            stderr_tail=_tail(self.state_dir, err),
            stdout_path=out,
            stderr_path=err,
            error=rec.error,
        )
