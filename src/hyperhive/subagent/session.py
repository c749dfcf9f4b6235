"""Subagents: bounded ``claude`` runs an agent starts, continues and interrupts.

One :class:`SubagentManager` per active agent, run by the agent host beside
the harness. A subagent is the real claude CLI started through the agent's
:class:`~hyperhive.agent.sandbox.AgentSandbox` (its own process group, the
agent's HOME), argv from :func:`hyperhive.agent.launch.subagent_argv`:

- ``--tools`` is resolved from ``runtime.groups`` — the very tuple the
  harness resolves its own turns from — so a subagent holds no built-in its
  parent lacks, and never an empty value;
- its MCP config is :func:`~hyperhive.agent.launch.subagent_mcp_config`: the
  ``subagent_control`` surface (``goal_reached``/``need_help``) and the
  agent's servers marked ``available_to_subagents``, nothing else.

Identity on ``subagent_control``: every *run* gets a fresh random token,
written only into that run's 0600 MCP config file and revoked when the run
ends. The host maps a presented token to the one running subagent holding
it (:meth:`SubagentManager.authenticate`), so a signal names its sender
without trusting anything in the request, and the agent's own token — which
the subagent never sees — is not accepted there.

Every run first takes one of the host's claude slots
(:mod:`hyperhive.agent.admission`). ``start``/``continue`` return at once
when it has to queue (``waiting_since`` set): blocking the parent's turn,
which holds a slot itself, on a free slot could deadlock the host.
``interrupt`` of a queued run just leaves the queue.

``continue`` resumes the same claude session (``--resume``, same cwd, since
claude files sessions by directory). ``interrupt`` stops the process group
(SIGTERM, SIGKILL after a grace). A run's end, ``goal_reached`` and
``need_help`` reach the parent as todos (subsystem ``subagent``). The table
is persisted; a host restart marks running subagents ``interrupted`` with a
todo, as bash tasks are.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import anyio
from anyio.abc import Process, TaskGroup, TaskStatus
from opentelemetry.context import Context
from pydantic import ValidationError

from hyperhive.agent.activity import ActivitySink
from hyperhive.agent.launch import subagent_effort, subagent_model
from hyperhive.agent.sandbox import signal_group
from hyperhive.agent.spend import SpendSink, subagent_spend
from hyperhive.agent.stream import ResultEvent
from hyperhive.agent.todos import TodoSink
from hyperhive.errors import (
    Conflict,
    InvalidRequest,
    LimitExceeded,
    NotFound,
    PermissionDenied,
    StorageError,
    Unavailable,
)
from hyperhive.names import validate_task_name
from hyperhive.safefs import atomic_write_beneath
from hyperhive.subagent.host import SubagentHost
from hyperhive.subagent.records import (
    Signal,
    SubagentRecord,
    SubagentTable,
    check_model,
    check_prompt,
    inside,
    preview,
    result_todo,
    signal_todo,
    todo_key,
)
from hyperhive.subagent.run import converse, spawn
from hyperhive.subagent.spans import record_run, subagent_span

__all__ = ["SUBAGENTS_SUBDIR", "SubagentManager"]

log = logging.getLogger(__name__)

SUBAGENTS_SUBDIR = Path("harness") / "subagents"


@dataclass(eq=False)
class _Entry:
    record: SubagentRecord
    token: str | None = None  # the running run's control token; None between runs
    process: Process | None = None
    waiting: anyio.CancelScope | None = None  # while queued for a claude slot
    interrupted: bool = False
    ended: anyio.Event = field(default_factory=anyio.Event)
    trace_parent: Context | None = None  # the parent's turn that started this run


class SubagentManager:
    """One agent's subagents; use as ``async with SubagentManager(rt, todos) as sm``."""

    def __init__(
        self,
        runtime: SubagentHost,
        todos: TodoSink,
        spend: SpendSink | None = None,
        *,
        activity: ActivitySink | None = None,
        trace_context: Callable[[], Context | None] | None = None,
        max_running: int = 8,
        kill_grace: float = 5.0,
        history: int = 200,
    ) -> None:
        self.rt = runtime
        self.dir = runtime.state_dir / SUBAGENTS_SUBDIR
        self.table_path = self.dir / "subagents.json"
        self._todos = todos
        self._spend = spend
        self._activity = activity
        self._trace_context = trace_context
        self._max_running = max_running
        self._kill_grace = kill_grace
        self._history = history
        self._entries: dict[str, _Entry] = {}
        self._persist_lock = anyio.Lock()
        self._tg: TaskGroup | None = None
        self._recovered: list[SubagentRecord] = []  # todos report_recovered() still owes

    # ---- lifecycle ---------------------------------------------------------

    async def __aenter__(self) -> SubagentManager:
        if self._tg is not None:
            raise RuntimeError("this SubagentManager is already running")
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
        tg.cancel_scope.cancel()  # runners kill their process groups, records stay "running"
        return await tg.__aexit__(exc_type, exc, tb)

    def _group(self) -> TaskGroup:
        if self._tg is None:
            raise Unavailable("subagents are not available (agent host starting or stopping)")
        return self._tg

    # ---- the four tools ----------------------------------------------------

    async def start(
        self,
        prompt: str,
        name: str | None = None,
        model: str | None = None,
        dir: str | None = None,
        prompt_file: str | None = None,
    ) -> SubagentRecord:
        """Spawn a new subagent on ``prompt``; returns once its claude runs or is queued."""
        self._group()
        prompt = check_prompt(prompt)
        model = check_model(model)
        cwd = self._inside_agent(dir, "dir", want_dir=True) if dir else self._work()
        system_file = self._inside_agent(prompt_file, "prompt_file", want_dir=False)
        if name is None:
            while (sid := secrets.token_hex(4)) in self._entries:
                pass
        else:
            sid = validate_task_name(name)
            old = self._entries.get(sid)
            if old is not None and old.record.status == "running":
                raise Conflict(
                    f"subagent {sid!r} is still running; a name is reusable once it has "
                    f"finished: status({sid!r}), interrupt({sid!r}), or pick another name"
                )
        self._check_capacity()
        entry = _Entry(
            SubagentRecord(
                id=sid,
                task=preview(prompt),
                model=model,
                cwd=str(cwd),
                prompt_file=str(system_file) if system_file else None,
                started_at=time.time(),
            ),
            trace_parent=self._turn_context(),
        )
        previous = self._entries.pop(sid, None)
        self._entries[sid] = entry
        try:
            await self._launch(entry, prompt)
        except BaseException:
            del self._entries[sid]
            if previous is not None:
                self._entries[sid] = previous
            await self._persist_quietly()
            raise
        self._prune()
        return entry.record

    async def resume(self, sid: str, prompt: str) -> SubagentRecord:
        """``continue``: a new run of a finished subagent, in the same claude session."""
        self._group()
        prompt = check_prompt(prompt)
        entry = self._get(sid)
        rec = entry.record
        if rec.status == "running":
            raise Conflict(
                f"subagent {sid!r} is still running; wait for its result, or interrupt it first"
            )
        if rec.session_id is None:
            raise InvalidRequest(
                f"subagent {sid!r} never got as far as a claude session (error: {rec.error}); "
                "start a new one"
            )
        self._check_capacity()
        for kind in ("result", "goal_reached", "need_help"):  # the parent is answering them
            await self._clear(sid, kind)
        snapshot = rec.model_copy()
        rec.started_at, rec.ended_at = time.time(), None
        rec.exit_code, rec.error, rec.last_output = None, None, ""
        rec.waiting_since = None
        entry.interrupted, entry.ended = False, anyio.Event()
        entry.trace_parent = self._turn_context()
        try:
            await self._launch(entry, prompt)
        except BaseException:
            entry.record = snapshot
            entry.ended.set()
            await self._persist_quietly()
            raise
        return entry.record

    async def interrupt(self, sid: str) -> bool:
        """Stop a running subagent's process group; False if it was not running."""
        entry = self._get(sid)
        process = entry.process
        if entry.record.status != "running":
            return False
        if process is None:
            if entry.waiting is None:
                return False  # between its slot and its process: a moment, not a state
            entry.interrupted = True
            entry.waiting.cancel()
            return True
        entry.interrupted = True
        signal_group(process, signal.SIGTERM)
        self._group().start_soon(self._reap, entry, process)
        return True

    async def status(self, sid: str) -> SubagentRecord:
        """A subagent's record; observing its end clears the end's todo."""
        entry = self._get(sid)
        if entry.record.status != "running":
            await self._clear(sid, "result")
        return entry.record

    # ---- subagent_control --------------------------------------------------

    def authenticate(self, token: str) -> str | None:
        """The id of the running subagent whose run holds ``token``."""
        presented = token.encode()
        for sid, entry in self._entries.items():
            if entry.token is not None and hmac.compare_digest(presented, entry.token.encode()):
                return sid
        return None

    def running(self, sid: str) -> bool:
        entry = self._entries.get(sid)
        return entry is not None and entry.token is not None

    def running_count(self) -> int:
        """Subagents in a run right now (the host's metrics)."""
        return sum(1 for e in self._entries.values() if e.token is not None)

    async def signal(self, sid: str, kind: Signal, text: str) -> None:
        """``goal_reached``/``need_help`` from subagent ``sid``: a todo for the parent.

        Filed without a wake: the run's end follows (a subagent that signals
        ends its run, and ``continue`` needs it ended), and that end's todo wakes
        the parent once, with both in view, instead of twice a moment apart.
        """
        if not self.running(sid):
            raise Conflict(f"subagent {sid!r} is not running")
        await self._todos.upsert(todo_key(sid, kind), signal_todo(sid, kind, text), wake=False)

    # ---- one run -----------------------------------------------------------

    async def _launch(self, entry: _Entry, prompt: str) -> None:
        rec = entry.record
        rec.status, rec.runs = "running", rec.runs + 1
        await self._persist()
        if self._activity is not None:
            await self._activity.report("started", rec.id, rec.task)
        try:
            await self._group().start(self._run, entry, prompt, name=f"subagent {rec.id}")
        except OSError as exc:
            raise Unavailable(f"could not start the subagent's claude: {exc}") from exc

    async def _run(self, entry: _Entry, prompt: str, *, task_status: TaskStatus[None]) -> None:
        admission = self.rt.admission
        ticket = admission.enqueue(self.rt.name, "subagent")
        try:
            if not ticket.granted.is_set():
                entry.record.waiting_since = ticket.waiter.since
                await self._persist_quietly()
                task_status.started()  # queued: the parent's turn goes on
                with anyio.CancelScope() as entry.waiting:
                    await admission.wait(ticket)
                entry.waiting = None
                entry.record.waiting_since = None
                if entry.interrupted or not ticket.granted.is_set():
                    await self._finish(entry, None)
                    return
                entry.record.started_at = time.time()
                try:
                    await self._converse(entry, prompt)
                except OSError as exc:  # start() has returned: the record says why
                    entry.record.error = f"could not start the subagent's claude: {exc}"
                    await self._finish(entry, None)
                return
            await self._converse(entry, prompt, task_status)
        finally:
            admission.release(ticket)

    async def _converse(
        self,
        entry: _Entry,
        prompt: str,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        rec, config = entry.record, self.rt.config
        with subagent_span(
            self.rt.name,
            rec.id,
            rec.runs,
            subagent_model(config, rec.model),
            subagent_effort(config),
            entry.trace_parent,
        ) as span:
            token = secrets.token_urlsafe(32)
            process = await spawn(self.rt, rec, token, self.dir / f"{rec.id}.log")
            entry.process, entry.token = process, token
            task_status.started()
            counted: float | None = None
            try:
                result = await converse(process, prompt, rec)
                code = await process.wait()
                if result is not None:
                    counted = await self._record_spend(rec, result)
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    signal_group(process, signal.SIGKILL)
                    await process.wait()
                raise
            finally:
                entry.token = None  # no signal after the run, whatever ended it
            signal_group(process, signal.SIGKILL)  # an MCP child claude left behind
            await process.aclose()
            entry.process = None
            await self._finish(entry, code)
            outcome = rec.status if rec.error is None else "error"
            record_run(span, outcome, code, result, counted)

    async def _finish(self, entry: _Entry, code: int | None) -> None:
        rec = entry.record
        rec.ended_at, rec.exit_code, rec.waiting_since = time.time(), code, None
        rec.status = "interrupted" if entry.interrupted else "finished"
        if code and not entry.interrupted and rec.error is None:
            rec.error = f"claude exited with {code}; see Read({self.dir / f'{rec.id}.log'})"
        await self._persist_quietly()
        if not entry.interrupted:  # the parent asked for an interrupt; it needs no todo
            await self._upsert(rec.id, "result", result_todo(rec, time.time()))
        entry.ended.set()
        if self._activity is not None:
            await self._activity.report(
                "finished", rec.id, rec.task, status=rec.status, exit_code=code
            )

    async def _reap(self, entry: _Entry, process: Process) -> None:
        with anyio.move_on_after(self._kill_grace):
            await entry.ended.wait()
        if not entry.ended.is_set():
            signal_group(process, signal.SIGKILL)

    # ---- table, todos, restart ---------------------------------------------

    async def _recover(self) -> None:
        records = await anyio.to_thread.run_sync(self._load)
        cut_off: list[SubagentRecord] = []
        for rec in records:
            entry = _Entry(rec)
            entry.ended.set()
            self._entries[rec.id] = entry
            if rec.status == "running":
                rec.status, rec.ended_at = "interrupted", time.time()
                rec.error = "the agent host stopped while this subagent ran"
                cut_off.append(rec)
        if cut_off:
            await self._persist()
        self._recovered = cut_off

    async def report_recovered(self) -> None:
        """File the todos of the runs a previous host cut off (call once published)."""
        owed, self._recovered = self._recovered, []
        for rec in owed:
            await self._upsert(rec.id, "result", result_todo(rec, time.time()))

    def _load(self) -> list[SubagentRecord]:
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            raw = self.table_path.read_bytes()
        except FileNotFoundError:
            return []
        try:
            return SubagentTable.model_validate_json(raw).subagents
        except ValidationError:
            aside = self.table_path.with_name(f"subagents.json.corrupt-{time.time_ns()}")
            self.table_path.replace(aside)
            log.warning("subagent table %s is unreadable; moved it to %s", self.table_path, aside)
            return []

    async def _persist(self) -> None:
        async with self._persist_lock:
            text = SubagentTable(
                subagents=[e.record for e in self._entries.values()]
            ).model_dump_json()
            await anyio.to_thread.run_sync(
                atomic_write_beneath, self.rt.state_dir, self.table_path, text.encode()
            )

    async def _persist_quietly(self) -> None:
        # A full disk must not take a runner (and with it every subagent) down.
        try:
            await self._persist()
        except StorageError as exc:
            log.warning("subagents: %s; the table is stale until the next write", exc)

    def _prune(self) -> None:
        done = [k for k, e in self._entries.items() if e.record.status != "running"]
        for key in done[: max(0, len(done) - self._history)]:
            del self._entries[key]

    async def _upsert(self, sid: str, kind: Signal, body: str) -> None:
        try:
            await self._todos.upsert(todo_key(sid, kind), body)
        except Exception:  # the coordinator being away must not lose the subagent itself
            log.warning("could not file the %s todo of subagent %s", kind, sid, exc_info=True)

    async def _record_spend(self, rec: SubagentRecord, result: ResultEvent) -> float | None:
        """Report the run's spend; the run's own cost as the store counted it (None: not
        reported, so unknown: claude's figure is its session's total, not the run's)."""
        if self._spend is None:
            return None
        try:
            counted = await self._spend.record(subagent_spend(result))
        except Exception:  # the coordinator being away must not lose the subagent itself
            log.warning("could not report a subagent run's spend", exc_info=True)
            return None
        rec.cost_usd += counted.cost_usd
        return counted.cost_usd

    async def _clear(self, sid: str, kind: Signal) -> None:
        try:
            await self._todos.clear(todo_key(sid, kind))
        except Exception:
            log.warning("could not clear the %s todo of subagent %s", kind, sid, exc_info=True)

    # ---- helpers -----------------------------------------------------------

    def _turn_context(self) -> Context | None:
        """The parent's open turn (its span's context), where a new run's span goes."""
        return self._trace_context() if self._trace_context is not None else None

    def _check_capacity(self) -> None:
        running = sum(1 for e in self._entries.values() if e.record.status == "running")
        if running >= self._max_running:
            raise LimitExceeded(
                f"{running} subagents are running, the most this agent may have at once; "
                "wait for one to finish or interrupt one"
            )

    def _work(self) -> Path:
        return self.rt.paths.agent_work(self.rt.name).resolve()

    def _inside_agent(self, raw: str | None, what: str, *, want_dir: bool) -> Path | None:
        """Resolve a path the caller gave (relative = to the workspace) inside its own dirs.

        A subagent runs in the agent's sandbox, which sees only the agent's
        directories: anything else would fail there, so it is refused here.
        """
        if raw is None:
            return None
        path = (self._work() / raw).resolve()
        root = self.rt.paths.agent_dir(self.rt.name).resolve()
        if not inside(path, root):
            raise PermissionDenied(f"{what} {raw!r} is outside your own directories ({root})")
        if want_dir and not path.is_dir():
            raise InvalidRequest(f"{what} {raw!r} is not an existing directory")
        if not want_dir and not path.is_file():
            raise InvalidRequest(f"{what} {raw!r} is not an existing file")
        return path

    def _get(self, sid: str) -> _Entry:
        entry = self._entries.get(sid)
        if entry is None:
            recent = ", ".join(list(self._entries)[-5:]) or "none yet"
            raise NotFound(f"no subagent {sid!r} on this agent (most recent: {recent})")
        return entry
