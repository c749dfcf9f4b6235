"""The turn loop: wait for something, run one ``claude --print`` turn, sleep again.

1. Long-poll the coordinator's ``wait`` on the agent's own socket.
2. Take one of the host's claude slots (``WaitingSlot`` while queued; a
   graceful stop while queued leaves the queue and ends the loop, the mail
   unacked). Build the wake prompt; spawn the real claude (argv from
   ``launch``) in the agent's sandbox, the prompt a stream-json line on a
   stdin kept open while the turn runs (``steering``: an operator's interrupt
   and text, and mail that arrives meanwhile, ``midturn``, go in there);
   stream its events to the bus.
3. Ack the messages that woke the turn (and those it took in mid-turn) only
   if it ended cleanly; otherwise start a new incarnation (after a backoff;
   none after the operator's interrupt) so they are delivered again.
   "Not logged in" is no failure to retry: the agent takes no turns until
   its credentials change (``hivectl login``) or it is restarted; nor is a
   claude its sandbox cannot start (``agent.claudecheck``).
4. Above the watermark, or when a compact was requested: a notes-checkpoint
   turn, then ``/compact``.
5. A fence (graceful stop) ends the loop after the current turn. An agent the stop
   finds idle first gets its flush turn (``flush_on_stop``, on by default): one
   short turn to save what it needs to its notes, cut by the stop's grace like
   any turn. Not for an agent that never had a session (nothing in context to
   save), nor after a turn the stop already let finish (that turn was its last),
   nor for one over budget (it takes no turn of any kind).
"""

from __future__ import annotations

import json
import logging
import math
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, Process

from hyperhive.agent import launch
from hyperhive.agent.active import ActiveAgent
from hyperhive.agent.admission import Abandoned
from hyperhive.agent.agentlog import AgentLog
from hyperhive.agent.claudecheck import hold_while_claude_unrunnable, launch_problem_of
from hyperhive.agent.events import EventsBus, TurnStateName
from hyperhive.agent.midturn import Wakes
from hyperhive.agent.outage import Outage, redial_delay
from hyperhive.agent.prompt import wake_prompt
from hyperhive.agent.sandbox import CLAUDE_OOM_SCORE_ADJ, signal_group
from hyperhive.agent.spec import AgentSpec
from hyperhive.agent.steering import INTERRUPT_GRACE_S, TurnInput
from hyperhive.agent.stream import (
    AssistantEvent,
    InitEvent,
    ResultEvent,
    StreamEvent,
    TurnReport,
    UserEvent,
    parse_line,
    summarize_turn,
)
from hyperhive.agent.turnend import RunKind, run_spend, tell_turn_end
from hyperhive.agent.turntrace import turn_span
from hyperhive.atomic import atomic_write_text
from hyperhive.client import RpcClient, connect
from hyperhive.credentials import LOGIN_REMEDY, fingerprint
from hyperhive.errors import HiveError, Unavailable
from hyperhive.framing import FrameDecoder
from hyperhive.protocol import (
    AttachReq,
    FenceReq,
    TurnEnded,
    TurnEndReq,
    WaitReq,
    WaitResult,
)
from hyperhive.safefs import atomic_write_beneath

__all__ = ["CHECKPOINT_PROMPT", "FLUSH_PROMPT", "claude_slot", "run_harness", "run_turn"]

log = logging.getLogger(__name__)

WAIT_SECONDS = 60.0
MAX_STREAM_LINE = 64 << 20
BACKOFF = (1.0, 2.0, 5.0, 15.0, 60.0)
RECONNECT_SECONDS = 0.5
RECONNECT_MAX_SECONDS = 2.0  # the wait doubles up to this while the coordinator is away
LOGIN_POLL_SECONDS = 1.0
STEER_SETTLE_S = 30.0  # after a result, how long claude gets to start the round of a line unseen
CHECKPOINT_PROMPT = (
    "Your context window is nearly full and will be compacted right after this turn. "
    "Write everything you must not forget (open work, decisions, who is waiting on what) "
    "to your durable notes under {state_dir} now, then end the turn."
)
FLUSH_PROMPT = (
    "The hive is stopping you gracefully; this is your last turn before it does. Write "
    "everything you must not forget (open work, decisions, who is waiting on what) to your "
    "durable notes under {state_dir} now, then end the turn. New mail waits for your next "
    "start."
)


def _session_file(spec: AgentSpec) -> Path:
    return spec.state_dir / "harness" / "session.json"


def load_session(spec: AgentSpec) -> str | None:
    try:
        data = json.loads(_session_file(spec).read_text())
    except (OSError, ValueError):
        return None
    value = data.get("session_id") if isinstance(data, dict) else None
    return value if isinstance(value, str) and value else None


def save_session(spec: AgentSpec, session_id: str | None) -> None:
    data = (json.dumps({"session_id": session_id}) + "\n").encode()
    atomic_write_beneath(spec.state_dir, _session_file(spec), data, 0o600)


def _publish(bus: EventsBus, event: StreamEvent) -> None:
    if isinstance(event, InitEvent):
        bus.emit("init", session_id=event.session_id, tools=list(event.tools))
    elif isinstance(event, AssistantEvent):
        if event.text:
            bus.emit("text", text=event.text)
        for use in event.tool_uses:
            bus.emit("tool_use", name=use.name, input=use.input)
    elif isinstance(event, UserEvent):
        for result in event.tool_results:
            bus.emit("tool_result", text=result.text[:2000], is_error=bool(result.is_error))
    elif isinstance(event, ResultEvent):
        bus.emit(
            "result",
            subtype=event.subtype,
            is_error=event.is_error,
            # The session's total so far, as claude reports it: not this run's cost.
            session_cost_usd=event.total_cost_usd,
            session_id=event.session_id,
        )


async def run_claude(
    agent: ActiveAgent, argv: Sequence[str], prompt: str, *, steerable: bool = False
) -> tuple[list[StreamEvent], int | None, TurnInput]:
    """One claude process in the agent's sandbox; killed with its group if cancelled.

    The prompt is a stream-json user line; a ``steerable`` run keeps stdin open
    (:mod:`~hyperhive.agent.steering`), held in ``agent.turns`` while it runs.
    """
    spec = agent.spec
    env = launch.claude_env({}, spec.home_dir, (), {**spec.config.env, **spec.hive_env()})
    events: list[StreamEvent] = []
    with AgentLog(spec.log_file).open() as stderr:
        proc = await agent.sandbox().open_process(
            argv,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            oom_score_adj=CLAUDE_OOM_SCORE_ADJ,
        )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        turn_input = TurnInput(proc.stdin, steerable=steerable)
        ended = anyio.Event()  # a result after an interrupt, or the end of output
        async with _sole_error(), anyio.create_task_group() as tg:
            tg.start_soon(_kill_if_interrupt_unheeded, proc, turn_input, ended)
            with agent.turns.running(proc.pid, turn_input):
                await turn_input.start(prompt)
                await _read_events(agent, proc.stdout, turn_input, events, ended)
                ended.set()
                await turn_input.close()
            code = await proc.wait()
            tg.cancel_scope.cancel()
        return events, code, turn_input
    finally:
        if proc.returncode is None:
            with anyio.CancelScope(shield=True):
                signal_group(proc, signal.SIGKILL)
                await proc.wait()


async def _read_events(
    agent: ActiveAgent,
    stdout: ByteReceiveStream,
    turn_input: TurnInput,
    events: list[StreamEvent],
    ended: anyio.Event,
) -> None:
    """claude's events until its output ends; steering its input as results come."""
    decoder = FrameDecoder(MAX_STREAM_LINE)
    lingering = False  # a result came with a line sent and not yet taken in
    while True:
        with anyio.move_on_after(STEER_SETTLE_S if lingering else math.inf) as wait:
            try:
                chunk = await stdout.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
        if wait.cancelled_caught:
            # No round followed for a line the model has not seen: end the run; its mail
            # stays unseen, so it is not acked and comes back.
            await turn_input.close()
            lingering = False
            continue
        for line in decoder.feed(chunk):
            if isinstance(line, HiveError):
                log.warning("%s: dropped an oversized stream-json line", agent.name)
                continue
            event = parse_line(line)
            if event is None:
                continue
            events.append(event)
            _publish(agent.bus, event)
            agent.records.event(event)
            lingering = False  # claude is at work (a new round, after a result)
            if isinstance(event, UserEvent) and event.replayed:
                if turn_input.saw(event.text):  # a line that reached the running turn
                    agent.bus.emit("user_message", text=event.text[:2000])
            elif isinstance(event, AssistantEvent) and event.parent_tool_use_id is None:
                if not event.synthetic:  # the model's answer: it saw the lines echoed so far
                    turn_input.answered(event.message.id)
            elif isinstance(event, ResultEvent):
                if turn_input.interrupted.is_set():
                    ended.set()
                await turn_input.result(failed=event.is_error or event.subtype != "success")
                lingering = turn_input.open


async def _kill_if_interrupt_unheeded(
    proc: Process, turn_input: TurnInput, ended: anyio.Event
) -> None:
    """An interrupt claude does not act on (a hung tool) ends with its process group."""
    await turn_input.interrupted.wait()
    with anyio.move_on_after(INTERRUPT_GRACE_S):
        await ended.wait()
        return
    log.warning("claude did not stop within %.0fs of an interrupt: killing it", INTERRUPT_GRACE_S)
    signal_group(proc, signal.SIGKILL)


@asynccontextmanager
async def claude_slot(
    agent: ActiveAgent, busy: TurnStateName, *, flush: bool = False
) -> AsyncIterator[None]:
    """Hold one of the host's claude slots for the block, then show ``busy``.

    Queued, the agent shows ``waiting_slot`` (since when it asked). A graceful
    stop while queued raises :class:`Abandoned` at once: the turn never ran,
    so its mail stays unacked and comes back to the next incarnation. The
    flush turn (``flush``) runs during the stop: only its kill abandons it.
    """

    def queued(_waiter: object) -> None:
        agent.bus.set_state("waiting_slot")

    admission = agent.site.admission
    lifetime = agent.lifetime
    abandon = lifetime.killed if flush else lifetime.stopping
    async with admission.slot(agent.name, "turn", on_wait=queued, abandon=abandon):
        agent.bus.set_state(busy)
        yield


async def run_turn(
    agent: ActiveAgent, prompt: str, session_id: str | None, *, steerable: bool = False
) -> tuple[TurnReport, TurnInput]:
    """Write the per-turn config files, run claude, summarize what happened.

    A ``steerable`` turn takes an interrupt and more messages while it runs; an
    interrupted one's outcome is ``interrupted`` whatever claude's result says.
    """
    spec, bus = agent.spec, agent.bus
    runtime = spec.runtime_dir
    runtime.mkdir(parents=True, exist_ok=True, mode=0o700)
    launched = launch.LaunchSpec(
        agent=spec.name,
        claude_bin=spec.hive.claude_bin or "claude",
        groups=spec.groups,
        capabilities=spec.capabilities,
        config=spec.config,
        base_url=agent.site.base_url,
        token=agent.token,
        mcp_config_file=runtime / "mcp-config.json",
        system_prompt_file=runtime / "system-prompt.md",
        session_id=session_id,
        model=spec.hive.default_model,
    )
    atomic_write_text(launched.mcp_config_file, json.dumps(launch.mcp_config(launched)), 0o600)
    atomic_write_text(launched.system_prompt_file, spec.system_prompt(), 0o600)
    agent.enclosure.give(launched.mcp_config_file)
    agent.enclosure.give(launched.system_prompt_file)
    bus.emit("turn_start", prompt=prompt[:2000])
    agent.records.prompt(prompt)
    agent_log = AgentLog(spec.log_file)
    agent_log.line(f"turn start: {prompt.splitlines()[0][:200] if prompt else ''}")
    started = time.monotonic()
    events, code, turn_input = await run_claude(
        agent, launch.harness_argv(launched), prompt, steerable=steerable
    )
    report = replace(
        summarize_turn(events, code, spec.hive.context_window),
        seconds=time.monotonic() - started,
    )
    if turn_input.interrupted.is_set():
        report = replace(report, outcome="interrupted")
    if session_id and not any(isinstance(e, InitEvent) for e in events) and code:
        # claude died before starting the conversation: the session it was asked
        # to resume does not exist (e.g. the turn that made it was killed early).
        log.warning(
            "%s: claude could not resume session %s; the next turn starts a new one",
            spec.name,
            session_id,
        )
        report = replace(report, session_id=None)
    return report, turn_input


async def _run_compaction(agent: ActiveAgent, session_id: str | None) -> list[TurnReport]:
    """The notes-checkpoint turn, then ``/compact``: both reports (both are spend)."""
    if session_id is None:
        return []
    async with claude_slot(agent, "compacting"):  # one slot for both: back to back
        checkpoint, _ = await run_turn(
            agent, CHECKPOINT_PROMPT.format(state_dir=agent.state_dir), session_id
        )
        report, _ = await run_turn(agent, "/compact", session_id)
    agent.bus.set_state("idle")
    return [checkpoint, report]


class _Loop:
    """The turn loop's state, kept across reconnects to a restarted coordinator."""

    def __init__(self, agent: ActiveAgent) -> None:
        self.agent = agent
        self.session_id = load_session(agent.spec)
        agent.bus.set_session(self.session_id)
        self.version = 0
        self.failures = 0
        self.attached = False
        # A turn_end the coordinator never answered: resent first after reconnecting,
        # so a clean turn's mail is acked exactly as if nothing had happened; and its
        # runs, told once the coordinator says what they were counted at.
        self.pending_end: TurnEndReq | None = None
        self._untold: tuple[list[TurnReport], RunKind] = ([], "turn")
        self.wakes = Wakes(agent.turns, agent.bus, WAIT_SECONDS)

    async def serve(self, rpc: RpcClient, attached: Callable[[], None] = lambda: None) -> None:
        agent = self.agent
        # After a lost connection, first settle the turn that already ran (ack its
        # mail), then start a new incarnation: anything the coordinator marked
        # delivered whose answer never reached us (it died mid-reply) comes back.
        if self.pending_end is not None:
            ended = await rpc.call(self.pending_end)
            self.pending_end = None
            reports, kind = self._untold
            tell_turn_end(agent, reports, ended.spend, kind)
        await rpc.call(AttachReq(cmd="attach"))
        self.wakes.forget()  # the new incarnation brings back whatever was kept
        self.attached = True
        attached()
        if agent.lifetime.stopping.is_set():
            await rpc.call(FenceReq(cmd="fence"))  # a graceful stop survives the reconnect
        try:
            # The tasks a turn leaves polling for mail (midturn) live as long as the link.
            async with _sole_error(), anyio.create_task_group() as self._polls:
                await self._loop(rpc)
                self._polls.cancel_scope.cancel()
        except Abandoned as exc:
            log.info("%s: %s; its mail comes back to the next incarnation", agent.name, exc)

    async def _loop(self, rpc: RpcClient) -> None:
        agent = self.agent
        while True:
            agent.bus.set_state("idle")
            # Stopped already: a turn (or its backoff) the stop let finish was its last.
            idle_at_stop = not agent.lifetime.stopping.is_set()
            woke = await self.wakes.next(rpc, self.version)
            if woke.messages or woke.todos_changed:
                woke = await self._gather(rpc, woke)
            if woke.stop:
                if idle_at_stop and not woke.held and self._owes_flush():
                    await self._flush(rpc)
                return
            self.version = woke.todo_version
            compact_now = woke.compact
            if woke.messages or woke.todos_changed:
                outcome = await self._turn(rpc, woke)
                if outcome is None:
                    if agent.lifetime.stopping.is_set():
                        return  # stopped during a backoff: its mail redelivers next time
                    continue
                compact_now = compact_now or outcome
            if compact_now:
                await self._compact(rpc)

    async def _gather(self, rpc: RpcClient, woke: WaitResult) -> WaitResult:
        """``woke`` plus whatever arrives within hive.toml's ``settle_seconds`` (news that
        lands together is one turn's, not two)."""
        settle = self.agent.spec.hive.settle_seconds
        if settle <= 0:
            return woke
        await anyio.sleep(settle)
        more = await rpc.call(WaitReq(cmd="wait", timeout=0, todo_version=woke.todo_version))
        return WaitResult(
            messages=[*woke.messages, *more.messages],
            todo_version=more.todo_version,
            todos_changed=woke.todos_changed or more.todos_changed,
            stop=more.stop,
            held=more.held,
            compact=woke.compact or more.compact,
        )

    async def _end(
        self,
        rpc: RpcClient,
        req: TurnEndReq,
        reports: list[TurnReport],
        kind: RunKind,
    ) -> TurnEnded:
        """Send the turn's end; then tell what its runs were counted at."""
        self.pending_end, self._untold = req, (reports, kind)
        result = await rpc.call(req)
        self.pending_end = None
        tell_turn_end(self.agent, reports, result.spend, kind)
        self.agent.snapshots.turn_ended()  # off the turn's path: its mail is acked already
        return result

    async def _turn(self, rpc: RpcClient, woke: WaitResult) -> bool | None:
        """Run one turn; True/False = compact or not, None = failed (mail redelivers)."""
        agent = self.agent
        if not await hold_while_claude_unrunnable(agent):
            return None  # stopped while held: the mail was never handled, so it comes back
        with turn_span(agent.name, agent.bus, woke, agent.spec.model):
            # Recorded once it has a slot: a stop while queued leaves no record (it never ran).
            async with claude_slot(agent, "thinking"):
                with agent.records.turn(woke):
                    prompt = wake_prompt(woke, agent.groups, agent.config.servers_for(agent.groups))
                    ended = anyio.Event()
                    if agent.spec.hive.midturn_mail:
                        # Mail that arrives while the turn runs is offered to it (midturn).
                        await self._polls.start(self.wakes.poll_during, rpc, self.version, ended)
                    try:
                        report, steered = await run_turn(
                            agent, prompt, self.session_id, steerable=True
                        )
                    finally:
                        ended.set()
                    agent.records.finish([report])
            self.session_id = _next_session(agent, self.session_id, report)
            clean = report.outcome == "ok"
            # What claude took in mid-turn is acked with the turn; the rest waits for the next.
            taken = self.wakes.taken(steered.seen_ids, self.version)
            end = await self._end(
                rpc,
                TurnEndReq(
                    cmd="turn_end",
                    outcome=report.outcome,
                    handled=[*(m.id for m in woke.messages), *taken] if clean else [],
                    context_usage=report.context_usage,
                    session_id=self.session_id,
                    spend=run_spend([report], "turn"),
                    seconds=report.seconds,
                ),
                [report],
                "turn",
            )
        if report.outcome == "needs_login":
            await self._await_login()
        elif steered.interrupted.is_set():
            # The operator's interrupt, not a failure (a claude killed by a signal is one):
            # no backoff; its mail comes back now and the next turn resumes the session.
            log.info("%s: turn interrupted; its mail is redelivered", agent.name)
        elif not clean and launch_problem_of(agent) is not None:
            # claude could not even start (it went out of reach mid-run): no backoff loop.
            await hold_while_claude_unrunnable(agent)
        elif not clean:
            self.failures += 1
            delay = BACKOFF[min(self.failures, len(BACKOFF)) - 1]
            log.warning(
                "%s: turn ended %s; redelivering after %.0fs", agent.name, report.outcome, delay
            )
            agent.bus.set_state("idle")
            # A graceful stop cuts the backoff short; only a live claude turn is waited for.
            with anyio.move_on_after(delay):
                await agent.lifetime.stopping.wait()
        if not clean:
            if not agent.lifetime.stopping.is_set():
                # Unacked mail comes back. Not after a stop: attaching would unfence
                # the inbox and start another turn of a hive that is stopping.
                await rpc.call(AttachReq(cmd="attach"))
                self.wakes.forget()
            return None
        self.failures = 0
        return end.compact_pending or (report.context_usage >= agent.spec.hive.compact_watermark)

    async def _await_login(self) -> None:
        """No credentials: take no turns until they change, or the agent is stopped.

        Retrying cannot help (claude fails the same way at once), and a loop of
        failed turns only hides the cause; the operator sees ``needs login``.
        """
        agent = self.agent
        spec = agent.spec
        before = fingerprint(spec.paths, spec.home_dir)
        log.warning(
            "%s: not logged in; no turns until credentials change: %s", agent.name, LOGIN_REMEDY
        )
        with agent.turns.held_for_login():
            agent.bus.set_state("idle")
            agent.bus.emit("needs_login", remedy=LOGIN_REMEDY)
            stopping = agent.lifetime.stopping
            while fingerprint(spec.paths, spec.home_dir) == before and not stopping.is_set():
                with anyio.move_on_after(LOGIN_POLL_SECONDS):
                    await stopping.wait()
        if not agent.lifetime.stopping.is_set():
            log.info("%s: credentials changed; taking turns again", agent.name)
            self.failures = 0

    def _owes_flush(self) -> bool:
        """A stop found it idle: a flush turn, unless off, or it has nothing to save."""
        agent = self.agent
        return (
            agent.spec.config.flush_on_stop
            and self.session_id is not None
            and not agent.lifetime.killed.is_set()
            and launch_problem_of(agent) is None
        )

    async def _flush(self, rpc: RpcClient) -> None:
        """The stop's flush turn: counted like any turn; no mail handled (new mail waits).

        Its bound is the stop's grace: past it, the host kills the activation and,
        with it, this claude.
        """
        agent = self.agent
        log.info("%s: graceful stop while idle: its flush turn", agent.name)
        with turn_span(agent.name, agent.bus, None, agent.spec.model, "flush"):
            async with claude_slot(agent, "thinking", flush=True):
                with agent.records.turn(WaitResult(stop=True)):
                    prompt = FLUSH_PROMPT.format(state_dir=agent.state_dir)
                    report, _ = await run_turn(agent, prompt, self.session_id)
                    agent.records.finish([report])
            self.session_id = _next_session(agent, self.session_id, report)
            await self._end(
                rpc,
                TurnEndReq(
                    cmd="turn_end",
                    outcome=report.outcome,
                    context_usage=report.context_usage,
                    session_id=self.session_id,
                    spend=run_spend([report], "turn"),
                ),
                [report],
                "turn",
            )

    async def _compact(self, rpc: RpcClient) -> None:
        agent = self.agent
        # One span for the checkpoint, /compact and their turn_end: they are counted as one.
        with turn_span(agent.name, agent.bus, None, agent.spec.model), agent.records.turn(None):
            reports = await _run_compaction(agent, self.session_id)
            agent.records.finish(reports, outcome=None if reports else "skipped")
            after = reports[-1] if reports else None
            usage = (after.usage.output_tokens / agent.spec.hive.context_window) if after else None
            await self._end(
                rpc,
                TurnEndReq(
                    cmd="turn_end",
                    outcome="ok",
                    context_usage=usage,
                    session_id=self.session_id,
                    spend=run_spend(reports, "compaction") if reports else None,
                    seconds=sum(r.seconds for r in reports) if reports else None,
                ),
                reports,
                "compaction",
            )
        agent.bus.set_context_usage(usage)


async def run_harness(agent: ActiveAgent) -> None:
    """The agent's whole life on this host; returns after a graceful stop.

    A coordinator restart is ridden out: the loop reconnects to the agent's
    socket and carries on (no new incarnation, so nothing is redelivered).
    """
    loop = _Loop(agent)
    lifetime = agent.lifetime
    outage = Outage(log, f"{agent.name}: coordinator unavailable")
    while True:
        try:
            async with connect(agent.connection.socket) as rpc:
                with agent.connection.held(rpc):
                    # Ended once attached: a coordinator that accepts the connection but
                    # cannot answer (its database away) is still an outage.
                    await loop.serve(rpc, attached=outage.ended)
                break
        except Unavailable as exc:
            if lifetime.stopping.is_set() and loop.pending_end is None:
                break  # a graceful stop with nothing left to tell the coordinator
            outage.failed(exc.message)
            # A stop asked while away ends the wait; one with a turn_end still owed waits
            # (within its host's grace) for the coordinator, to settle that turn first.
            ends = (
                (lifetime.killed,)
                if lifetime.stopping.is_set()
                else (lifetime.killed, lifetime.stopping)
            )
            delay = redial_delay(outage.failures, RECONNECT_SECONDS, RECONNECT_MAX_SECONDS)
            with anyio.move_on_after(delay):
                await _first_set(*ends)
            if lifetime.killed.is_set():
                break  # stopped by its host (a fence, a kill): not a crash
    agent.bus.set_state("stopped")


@asynccontextmanager
async def _sole_error() -> AsyncIterator[None]:
    """A task group's body error as itself: its tasks never fail, so a group wraps one."""
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


async def _first_set(*events: anyio.Event) -> None:
    """Return once any of ``events`` is set."""
    async with anyio.create_task_group() as tg:

        async def one(event: anyio.Event) -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        for event in events:
            tg.start_soon(one, event)


def _next_session(agent: ActiveAgent, current: str | None, report: TurnReport) -> str | None:
    """Keep the conversation: the turn's session id; drop one claude cannot resume."""
    new = report.session_id
    if new is None and report.outcome != "error":
        new = current  # e.g. an auth failure: the conversation itself is fine
    if new != current:
        save_session(agent.spec, new)
    agent.bus.set_session(new)
    agent.bus.set_context_usage(report.context_usage)
    return new
