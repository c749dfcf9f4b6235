"""hyperhive.bash.tasks and hyperhive.agent.sandbox, with real processes."""

from __future__ import annotations

import json
import logging
import math
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process

from hyperhive.agent.activity import Phase
from hyperhive.agent.sandbox import AgentSandbox, process_identity, signal_group
from hyperhive.bash.tasks import TaskManager, TaskReport, TaskStarted
from hyperhive.errors import (
    Conflict,
    InvalidName,
    InvalidRequest,
    LimitExceeded,
    NotFound,
    Unavailable,
)
from tests.support.surfaces import until


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


pytestmark = pytest.mark.anyio


@dataclass
class RecordingTodos:
    """The TodoSink plug-in point: records what would go to the coordinator."""

    events: list[tuple[str, str, str]] = field(default_factory=list)
    quiet: set[str] = field(default_factory=set)  # bodies upserted with wake=False

    async def upsert(self, key: str, body: str, *, wake: bool = True) -> None:
        self.events.append(("upsert", key, body))
        if not wake:
            self.quiet.add(body)

    async def clear(self, key: str) -> None:
        self.events.append(("clear", key, ""))

    def open(self) -> dict[str, str]:
        todos: dict[str, str] = {}
        for op, key, body in self.events:
            if op == "upsert":
                todos[key] = body
            else:
                todos.pop(key, None)
        return todos

    def ops(self, key: str) -> list[str]:
        return [
            op if op == "clear" else f"upsert:{body.split(':')[0]}"
            for op, k, body in self.events
            if k == key
        ]


@dataclass
class RecordingActivity:
    """The ActivitySink plug-in point: records what the feed would be told."""

    events: list[tuple[str, str, str | None, int | None]] = field(default_factory=list)

    async def report(
        self,
        phase: Phase,
        ref: str,
        summary: str,
        *,
        status: str | None = None,
        exit_code: int | None = None,
    ) -> None:
        self.events.append((phase, ref, status, exit_code))

    def phases(self, ref: str) -> list[str]:
        return [e[0] for e in self.events if e[1] == ref]


@pytest.fixture
def sandbox(tmp_path: Path) -> AgentSandbox:
    dirs = {d: tmp_path / d for d in ("work", "home", "state")}
    for d in dirs.values():
        d.mkdir()
    return AgentSandbox(
        agent="alice", work=dirs["work"], home=dirs["home"], state=dirs["state"], env={"LANG": "C"}
    )


@asynccontextmanager
async def manager(
    sandbox: AgentSandbox, todos: RecordingTodos, **kwargs: Any
) -> AsyncIterator[TaskManager]:
    async with TaskManager(sandbox, sandbox.state, todos, **kwargs) as tm:
        await tm.report_recovered()  # as agent_services does once it has published tm
        yield tm


async def finished(tm: TaskManager, task_id: str) -> TaskReport:
    with anyio.fail_after(30):
        while not (report := await tm.status(task_id, wait_seconds=30)).terminal:
            pass
    return report


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``."""
    members = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            members.append(int(proc.name))
    return members


def table(tm: TaskManager) -> dict[str, dict[str, object]]:
    return {t["id"]: t for t in json.loads(tm.table_path.read_text())["tasks"]}


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


# ---- sandbox ---------------------------------------------------------------


async def test_sandbox_builds_env_cwd_and_session(
    sandbox: AgentSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HYPERHIVE_TEST_SECRET", "leaked")
    assert sandbox.command(["echo", "x"]) == ["echo", "x"]
    with pytest.raises(InvalidRequest):
        sandbox.command([])
    script = 'echo "$PWD|$HOME|${HYPERHIVE_TEST_SECRET-unset}|$LANG|$EXTRA|$(ps -o sid= -p $$)"'
    process = await sandbox.open_process(["bash", "-c", script], env={"EXTRA": "x"})
    async with process:
        assert process.stdout is not None
        out = b"".join([chunk async for chunk in process.stdout]).decode()
        await process.wait()
    cwd, home, secret, lang, extra, sid = out.strip().split("|")
    assert (cwd, home, secret, lang, extra) == (
        str(sandbox.work),
        str(sandbox.home),
        "unset",
        "C",
        "x",
    )
    assert int(sid) == process.pid  # its own session, so pgid == pid
    assert "PATH" in sandbox.environment() and sandbox.environment({"HOME": "/"})["HOME"] == str(
        sandbox.home
    )


async def test_signal_group_is_safe() -> None:
    with pytest.raises(ValueError):
        signal_group(os.getpgrp(), signal.SIGTERM)
    with pytest.raises(ValueError):
        signal_group(0, signal.SIGTERM)
    process = await anyio.open_process(["true"], start_new_session=True)
    async with process:
        await process.wait()
    assert signal_group(process, signal.SIGTERM) is False
    assert process_identity(process.pid) is None
    assert process_identity(os.getpid()) is not None


# ---- run / status / todos ----------------------------------------------------


async def test_fast_task_reports_inline_and_leaves_no_todo(sandbox: AgentSandbox) -> None:
    todos = RecordingTodos()
    async with manager(sandbox, todos) as tm:
        result = await tm.run("echo hi; echo oops >&2; pwd; exit 3", wait_seconds=10)
        assert isinstance(result, TaskReport)
        assert (result.status, result.exit_code) == ("done", 3)
        assert result.stdout_tail == f"hi\n{sandbox.work}\n"
        assert result.stderr_tail == "oops\n"
        assert result.duration_secs is not None
        assert result.stdout_path == sandbox.state / "harness/bash-tasks" / f"{result.id}.out"
        assert 8 <= len(result.id) <= 12 and int(result.id, 16) >= 0
        # Ended inside the window: the answer is the result, no todo is ever filed
        # (a filed-then-cleared one would wake the agent a turn later for nothing).
        assert todos.ops(result.id) == []
        assert table(tm)[result.id]["status"] == "done"
        assert table(tm)[result.id]["todo_synced"] is True  # nothing to re-file after a restart
        again = await tm.status(result.id)
        assert again.exit_code == 3 and todos.ops(result.id) == []


async def test_slow_task_starts_with_a_todo_and_status_clears_it(sandbox: AgentSandbox) -> None:
    todos = RecordingTodos()
    async with manager(sandbox, todos) as tm:
        started = await tm.run("echo begun; sleep 100", wait_seconds=0.2)
        assert isinstance(started, TaskStarted)
        await until(lambda: started.id in todos.open())
        assert "running" in todos.open()[started.id]
        # This turn started it: listed, but it wakes no turn; the completion does.
        assert todos.open()[started.id] in todos.quiet
        report = await tm.status(started.id, wait_seconds=0.1)
        assert report.status == "running" and report.exit_code is None
        await until(lambda: table(tm)[started.id]["status"] == "running")
        assert todos.open()  # a running task's todo stays until it ends and is observed
        assert await tm.kill(started.id) == "signalled"
        report = await finished(tm, started.id)
        assert report.status == "killed"
        assert report.stdout_tail == "begun\n"
        assert f"bash task {started.id} killed" in todos.ops(started.id)[-2]
        assert todos.ops(started.id)[-1] == "clear" and todos.open() == {}
        assert await tm.kill(started.id) == "already_finished"


async def test_a_cut_off_inline_wait_leaves_a_waking_todo(sandbox: AgentSandbox) -> None:
    # The caller of run() went away mid-window: nobody reads the inline result,
    # so the task must come back as a loose end rather than end in silence.
    todos = RecordingTodos()
    async with manager(sandbox, todos) as tm:
        gate = sandbox.work / "gate"
        cmd = f"while [ ! -e {gate} ]; do sleep 0.01; done; echo ok"
        async with anyio.create_task_group() as caller:
            caller.start_soon(lambda: tm.run(cmd, 60, wait_seconds=20, name="cut"))
            await until(lambda: "cut" in tm._entries and tm._entries["cut"].process is not None)
            caller.cancel_scope.cancel()  # inside its wait window
        assert "running" in todos.open()["cut"] and todos.open()["cut"] not in todos.quiet
        gate.touch()
        await until(lambda: "done (exit 0)" in todos.open().get("cut", ""))
        assert todos.open()["cut"] not in todos.quiet


async def test_unobserved_completion_stays_as_a_todo(sandbox: AgentSandbox) -> None:
    todos = RecordingTodos()
    async with manager(sandbox, todos) as tm:
        gate = sandbox.work / "gate"
        started = await tm.run(f"while [ ! -e {gate} ]; do sleep 0.01; done; echo ok", 60, 0)
        assert isinstance(started, TaskStarted)
        gate.touch()
        await until(lambda: "done (exit 0)" in todos.open().get(started.id, ""))
        assert table(tm)[started.id]["status"] == "done"
        assert todos.open()[started.id] not in todos.quiet
        body = todos.open()[started.id]
        assert f"Read({started.stdout_path})" in body and f"Read({started.stderr_path})" in body
        report = await tm.status(started.id)
        assert (report.status, report.exit_code, report.stdout_tail) == ("done", 0, "ok\n")
        assert todos.open() == {}


# ---- the feed: one event for an inline task, a started/finished pair otherwise ----


async def test_a_task_that_ends_inline_is_one_ran_event(sandbox: AgentSandbox) -> None:
    feed = RecordingActivity()
    async with manager(sandbox, RecordingTodos(), activity=feed) as tm:
        result = await tm.run("exit 3", wait_seconds=10)
        assert isinstance(result, TaskReport)
    assert feed.events == [("ran", result.id, "done", 3)]


async def test_a_task_past_its_window_is_started_then_finished(sandbox: AgentSandbox) -> None:
    feed = RecordingActivity()
    async with manager(sandbox, RecordingTodos(), activity=feed) as tm:
        gate = sandbox.work / "gate"
        cmd = f"while [ ! -e {gate} ]; do sleep 0.01; done; exit 4"
        # Started inside the window, still running when it ends: run() tells the start.
        late = await tm.run(cmd, 60, wait_seconds=0.3)
        # No window at all: the runner tells the start itself.
        background = await tm.run(cmd, 60, wait_seconds=0)
        assert isinstance(late, TaskStarted) and isinstance(background, TaskStarted)
        await until(lambda: feed.phases(background.id) == ["started"])
        assert feed.phases(late.id) == ["started"]
        gate.touch()
        for task in (late, background):
            assert (await finished(tm, task.id)).exit_code == 4
        await until(lambda: len(feed.events) == 4)
    for task in (late, background):
        assert [e for e in feed.events if e[1] == task.id] == [
            ("started", task.id, None, None),
            ("finished", task.id, "done", 4),
        ]


async def test_a_cut_off_inline_wait_tells_the_start(sandbox: AgentSandbox) -> None:
    feed = RecordingActivity()
    async with manager(sandbox, RecordingTodos(), activity=feed) as tm:
        gate = sandbox.work / "gate"
        cmd = f"while [ ! -e {gate} ]; do sleep 0.01; done"
        async with anyio.create_task_group() as caller:
            caller.start_soon(lambda: tm.run(cmd, 60, wait_seconds=20, name="cut"))
            await until(lambda: "cut" in tm._entries and tm._entries["cut"].process is not None)
            assert feed.events == []  # inside the window: nothing told yet
            caller.cancel_scope.cancel()
        assert feed.phases("cut") == ["started"]
        gate.touch()
        await until(lambda: feed.phases("cut") == ["started", "finished"])


@pytest.mark.parametrize("force", [False, True])
async def test_kill_stops_the_whole_process_group(sandbox: AgentSandbox, force: bool) -> None:
    todos = RecordingTodos()
    async with manager(sandbox, todos, kill_grace=2) as tm:
        started = await tm.run("sleep 100 & sleep 100 & wait", wait_seconds=0)
        await until(lambda: table(tm)[started.id]["status"] == "running")
        pgid = table(tm)[started.id]["pid"]
        assert isinstance(pgid, int)
        await until(lambda: len(group_members(pgid)) == 3)  # bash and its two sleeps
        assert await tm.kill(started.id, force=force) == "signalled"
        report = await finished(tm, started.id)
        assert report.status == "killed"
        await until(lambda: group_members(pgid) == [])


async def test_timeout_kills_and_marks_timed_out(sandbox: AgentSandbox) -> None:
    todos = RecordingTodos()
    async with manager(sandbox, todos, kill_grace=0.5) as tm:
        # Ignoring SIGTERM forces the SIGKILL escalation after the grace.
        report = await tm.run("trap '' TERM; sleep 100 & wait", timeout_secs=0.3, wait_seconds=20)
        assert isinstance(report, TaskReport)
        assert report.status == "timed_out"
        assert report.exit_code == -signal.SIGKILL
        assert todos.ops(report.id) == []  # reported inline: no todo
        assert table(tm)[report.id]["status"] == "timed_out"


async def test_kill_of_a_pending_task_cancels_it_before_it_starts(sandbox: AgentSandbox) -> None:
    todos = RecordingTodos()
    async with manager(sandbox, todos, max_running=1) as tm:
        blocker = await tm.run("sleep 100", wait_seconds=0)
        queued = await tm.run("echo should-not-run", wait_seconds=0.1)
        assert isinstance(queued, TaskStarted)
        assert (await tm.status(queued.id)).status == "pending"
        assert await tm.kill(queued.id) == "cancelled"
        report = await finished(tm, queued.id)
        assert (report.status, report.exit_code, report.duration_secs) == ("killed", None, None)
        assert not queued.stdout_path.exists()
        assert todos.ops(queued.id) == [
            f"upsert:bash task {queued.id} queued for a free slot",
            f"upsert:bash task {queued.id} killed",
            "clear",
        ]
        assert await tm.kill(blocker.id, force=True) == "signalled"
        assert (await finished(tm, blocker.id)).status == "killed"


async def test_name_reuse_only_after_the_task_ended(sandbox: AgentSandbox) -> None:
    todos = RecordingTodos()
    async with manager(sandbox, todos) as tm:
        first = await tm.run("sleep 100", name="build", wait_seconds=0)
        assert first.id == "build"
        with pytest.raises(Conflict, match="still"):
            await tm.run("echo again", name="build")
        await tm.kill("build")
        assert (await finished(tm, "build")).status == "killed"
        again = await tm.run("echo again", name="build", wait_seconds=10)
        assert isinstance(again, TaskReport)
        assert (again.id, again.status, again.stdout_tail) == ("build", "done", "again\n")
        for bad in ("Build", "a b", "x" * 64, "", "../x"):
            with pytest.raises(InvalidName):
                await tm.run("true", name=bad)


async def test_bad_input_is_refused_with_a_message(sandbox: AgentSandbox) -> None:
    async with manager(sandbox, RecordingTodos()) as tm:
        for cmd in ("", "   \n\t"):
            with pytest.raises(InvalidRequest, match="empty"):
                await tm.run(cmd)
        with pytest.raises(InvalidRequest, match="NUL"):
            await tm.run("echo \0")
        with pytest.raises(LimitExceeded):
            await tm.run("#" * 200_000)
        for timeout in (0, -1, math.nan, math.inf):
            with pytest.raises(InvalidRequest, match="timeout_secs"):
                await tm.run("true", timeout_secs=timeout)
        with pytest.raises(LimitExceeded, match="7-day"):
            await tm.run("true", timeout_secs=8 * 24 * 3600)
        with pytest.raises(InvalidRequest, match="wait_seconds"):
            await tm.run("true", wait_seconds=-1)
        with pytest.raises(NotFound, match="'nope'"):
            await tm.status("nope")
        with pytest.raises(NotFound):
            await tm.kill("nope")
        assert isinstance(await tm.run("true", wait_seconds=1e9), TaskReport)  # capped, not refused
    with pytest.raises(Unavailable):
        await tm.run("true")


# ---- restarts and the table ------------------------------------------------


async def test_host_restart_marks_running_tasks_interrupted(sandbox: AgentSandbox) -> None:
    todos = RecordingTodos()
    async with manager(sandbox, todos, kill_grace=1) as tm:
        started = await tm.run("sleep 100 & sleep 100 & wait", name="long", wait_seconds=0)
        done = await tm.run("echo fine", name="short", wait_seconds=10)
        await until(lambda: table(tm)["long"]["status"] == "running")
        pgid = table(tm)["long"]["pid"]
        assert isinstance(pgid, int) and isinstance(done, TaskReport)
    # Leaving the manager killed the group and left the record saying "running".
    # SIGKILL lands at once but the orphaned sleeps take a moment to be torn down.
    await until(lambda: group_members(pgid) == [])
    assert table(tm)["long"]["status"] == "running"

    # Entering files nothing yet: the owner publishes the manager first, so the
    # turn such a todo wakes finds it; report_recovered() then files them.
    todos = RecordingTodos()
    async with TaskManager(sandbox, sandbox.state, todos) as bare:
        assert todos.events == [] and table(bare)["long"]["status"] == "interrupted"
    todos = RecordingTodos()
    async with manager(sandbox, todos) as tm2:
        assert "interrupted" in todos.open()["long"]
        assert "short" not in todos.open()
        report = await tm2.status(started.id)
        assert report.status == "interrupted" and report.exit_code is None
        assert todos.open() == {}
        assert table(tm2)["long"]["status"] == "interrupted"
        assert (await tm2.status("short")).stdout_tail == "fine\n"


async def _spawn_sleeper() -> Process:
    return await anyio.open_process(["sleep", "100"], start_new_session=True)


async def test_restart_after_crash_checks_pid_identity(sandbox: AgentSandbox) -> None:
    """A crashed host left one task alive; another record's pid now names a stranger."""
    survivor, stranger = await _spawn_sleeper(), await _spawn_sleeper()
    try:
        identity = process_identity(survivor.pid)
        records = [
            {"id": "alive", "cmd": "sleep 100", "status": "running", "created_at": 1.0,
             "started_at": 1.0, "pid": survivor.pid, "identity": identity},
            {"id": "reused", "cmd": "sleep 100", "status": "running", "created_at": 1.0,
             "started_at": 1.0, "pid": stranger.pid, "identity": "other-boot:1:1"},
            {"id": "queued", "cmd": "true", "status": "pending", "created_at": 1.0},
        ]  # fmt: skip
        tasks_dir = sandbox.state / "harness/bash-tasks"
        tasks_dir.mkdir(parents=True)
        (tasks_dir / "tasks.json").write_text(json.dumps({"version": 1, "tasks": records}))

        todos = RecordingTodos()
        async with manager(sandbox, todos) as tm:
            assert set(todos.open()) == {"alive", "reused", "queued"}
            for task_id in ("alive", "reused", "queued"):
                assert (await tm.status(task_id)).status == "interrupted"
            with anyio.fail_after(10):
                assert await survivor.wait() == -signal.SIGKILL  # our leftover: killed
            assert stranger.returncode is None and process_identity(stranger.pid)  # not ours
    finally:
        for process in (survivor, stranger):
            if process.returncode is None:
                process.kill()
            await process.aclose()


async def test_corrupt_table_is_set_aside(
    sandbox: AgentSandbox, caplog: pytest.LogCaptureFixture
) -> None:
    tasks_dir = sandbox.state / "harness/bash-tasks"
    tasks_dir.mkdir(parents=True)
    truncated = b'{"version": 1, "tasks": [{"id": "x", "cmd": "sle'
    (tasks_dir / "tasks.json").write_bytes(truncated)
    with caplog.at_level(logging.WARNING, logger="hyperhive.bash.tasks"):
        async with manager(sandbox, RecordingTodos()) as tm:
            with pytest.raises(NotFound):
                await tm.status("x")
            report = await tm.run("echo after", wait_seconds=10)
            assert isinstance(report, TaskReport) and report.status == "done"
            assert list(table(tm)) == [report.id]
    (aside,) = tasks_dir.glob("tasks.json.corrupt-*")
    assert aside.read_bytes() == truncated
    assert str(tasks_dir / "tasks.json") in caplog.text and str(aside) in caplog.text


async def test_huge_output_streams_to_disk_with_flat_memory(sandbox: AgentSandbox) -> None:
    size = 200 * 1024 * 1024
    async with manager(sandbox, RecordingTodos()) as tm:
        before = rss_kib()
        started = await tm.run(f"head -c {size} /dev/zero | tr '\\0' x", wait_seconds=0)
        report = await finished(tm, started.id)
        growth_mib = (rss_kib() - before) / 1024
    assert (report.status, report.exit_code) == ("done", 0)
    assert report.stdout_path.stat().st_size == size
    assert report.stdout_tail == "x" * 4096
    assert growth_mib < 50, f"RSS grew {growth_mib:.0f} MiB streaming {size >> 20} MiB"
