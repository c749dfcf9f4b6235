"""Background bash tasks (spec 001): run, status, kill, and survive restarts.

One :class:`TaskManager` per agent. A task is ``bash -c cmd`` started through
the agent's :class:`~hyperhive.agent.sandbox.AgentSandbox`, in its own process
group, in the agent's workspace. Its stdout and stderr are file descriptors
of ``<state>/harness/bash-tasks/<id>.out|.err`` handed to the child: output
never passes through this process, so a task printing gigabytes costs the
host no memory. ``status`` reads the last 4 KiB back from those files.

Every state change is written atomically to ``tasks.json`` beside them; the
table, its restart rules and the kill grace are :mod:`hyperhive.proctable`'s.

``kill`` signals the whole group; once the shell has exited, whatever it left
in its group (``cmd &`` children, which bash -c starts ignoring SIGINT) gets
SIGTERM, then SIGKILL after a grace: a killed task means all of it.

Restarts: a manager never adopts a process it did not start in this life.
Leaving its ``async with`` block kills the process groups of its live tasks
and leaves their records ``running``; entering it marks them ``interrupted``
(see :class:`~hyperhive.proctable.ProcTable`), each with a todo.

Todos: one per task, key = task id: "running" once ``run``'s wait window has
passed with the task still going, the completion summary at the end, cleared
by any ``run``/``status`` that observes the end. A task that ends inside the
window files no todo at all (spec 001): its result is the answer, and a todo
would wake the agent a turn later for nothing.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import Process

from hyperhive.agent.activity import ActivitySink, Phase
from hyperhive.agent.sandbox import AgentSandbox, signal_group
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
from hyperhive.errors import StorageError
from hyperhive.proctable import Entry, ProcTable, TableFile, output_file, output_tail

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

TASKS_SUBDIR = Path("harness") / "bash-tasks"


@dataclass(eq=False)
class _Entry(Entry[TaskRecord]):
    # ``ended``: ended and its end todo sent.
    start_scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    kill_requested: bool = False
    force: bool = False
    todo_cleared: bool = False
    # run() is still waiting inline: the runner files no todo, the caller gets the result.
    inline: bool = False
    # The feed was told it started; a task that ends inline is told once, as "ran".
    start_reported: bool = False
    # Serialises the "running" todo (filed by run()) with the completion one (the runner).
    todo_lock: anyio.Lock = field(default_factory=anyio.Lock)


async def _group_gone(pgid: int) -> None:
    # Orphans of the shell are no children of ours to wait on: watch their group.
    while signal_group(pgid, 0):  # noqa: ASYNC110
        await anyio.sleep(0.05)


class TaskManager(ProcTable[TaskRecord, _Entry]):
    """One agent's background bash tasks; use as ``async with TaskManager(...) as tm``.

    ``max_running`` tasks run at once; later ones wait as ``pending``.
    ``kill_grace`` is how long a timed-out (or shut-down) task gets between
    SIGTERM and SIGKILL. ``history`` bounds how many finished tasks the table keeps.
    ``sandbox`` may be a function called per task: the agent's env (its parent after
    a reparent, a new login) is then read when the task starts, not when the host did.
    """

    noun = "bash task"
    id_hint = "; ids come from run()"

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
        super().__init__(
            state_dir,
            TableFile(state_dir / TASKS_SUBDIR, "tasks.json", TaskTable, "tasks"),
            todos,
            kill_grace=kill_grace,
            history=history,
        )
        self._sandbox = sandbox if callable(sandbox) else (lambda: sandbox)
        self._activity = activity
        self._slots = anyio.Semaphore(max_running)

    # ---- the table's questions ---------------------------------------------

    def _entry(self, record: TaskRecord) -> _Entry:
        return _Entry(record)

    def _live(self, record: TaskRecord) -> bool:
        return record.status not in TERMINAL

    def _interrupt(self, record: TaskRecord) -> None:
        record.status = "interrupted"
        record.error = "the agent host stopped while this task was pending or running"

    def _owes_todo(self, record: TaskRecord) -> bool:
        return not record.todo_synced

    async def _completion_todo(self, entry: _Entry) -> None:
        await self._upsert(entry, summary(entry.record, *self.paths(entry.record.id)))

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
        self._group()
        cmd = check_cmd(cmd)
        timeout = check_timeout(timeout_secs)
        wait = check_wait(wait_seconds)
        task_id = self._claim(
            name,
            id_bytes=5,
            busy=f"a name is reusable once its task has finished: wait for it, "
            f"kill({name!r}), or pick another name",
        )
        entry = _Entry(
            TaskRecord(id=task_id, cmd=cmd, created_at=time.time(), timeout_secs=timeout)
        )
        previous = self._install(entry)
        self._prune()
        try:
            await self._persist()
        except StorageError:
            self._uninstall(entry, previous)
            raise
        entry.inline = wait > 0
        self._group().start_soon(self._supervise, entry, name=f"bash task {task_id}")
        try:
            if wait > 0:
                await self._wait(entry, wait)
            async with entry.todo_lock:
                entry.inline = False
                if entry.ended.is_set():
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
            if entry.ended.is_set():
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
        await self._wait(entry, check_wait(wait_seconds))
        if entry.record.status in TERMINAL:
            await entry.ended.wait()  # so the clear lands after the completion upsert
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
                out_fd = output_file(self.state_dir, out)
                fds.callback(os.close, out_fd)
                err_fd = output_file(self.state_dir, err)
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
        self._spawned(entry, process)
        rec.status, rec.started_at = "running", time.time()
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
                await self._stop(process)
            elif entry.kill_requested:
                await self._sweep(process.pid, entry.force)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._stop(process)
                await process.aclose()
            raise
        await process.aclose()
        rec.exit_code = process.returncode
        await self._finish(
            entry, "timed_out" if timed_out else "killed" if entry.kill_requested else "done"
        )

    async def _stop(self, process: Process) -> None:
        await self._terminate(process, process.wait)
        # Also reaches children that outlived the shell or ignored SIGTERM.
        signal_group(process, signal.SIGKILL)
        await process.wait()

    async def _sweep(self, pgid: int, force: bool) -> None:
        if force:
            signal_group(pgid, signal.SIGKILL)
        else:
            await self._terminate(pgid, functools.partial(_group_gone, pgid))

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
                entry.ended.set()
        if self._activity is not None:
            await self._activity.report(
                phase, rec.id, preview(rec.cmd), status=status, exit_code=rec.exit_code
            )

    # ---- todos -------------------------------------------------------------

    async def _upsert(self, entry: _Entry, body: str, *, wake: bool = True) -> None:
        entry.todo_cleared = False
        if not await self._file_todo(entry.record.id, body, wake=wake):
            return
        if entry.record.status in TERMINAL and not entry.record.todo_synced:
            entry.record.todo_synced = True
            await self._persist_quietly()

    async def _clear_todo(self, entry: _Entry) -> None:
        if entry.todo_cleared:
            return
        entry.todo_cleared = True
        if not await self._drop_todo(entry.record.id):
            entry.todo_cleared = False
            return
        if entry.record.status in TERMINAL and not entry.record.todo_synced:
            entry.record.todo_synced = True
            await self._persist_quietly()

    def _report(self, entry: _Entry) -> TaskReport:
        rec = entry.record
        out, err = self.paths(rec.id)
        return TaskReport(
            id=rec.id,
            cmd=rec.cmd,
            status=rec.status,
            exit_code=rec.exit_code,
            duration_secs=duration(rec, time.time()),
            stdout_tail=output_tail(self.state_dir, out, TAIL_BYTES),
            stderr_tail=output_tail(self.state_dir, err, TAIL_BYTES),
            stdout_path=out,
            stderr_path=err,
            error=rec.error,
        )
