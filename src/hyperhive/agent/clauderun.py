"""One run of claude for the agent: a slot, its files, its process, its events.

:func:`run_turn` is the whole run: it writes the run's MCP config and system
prompt, spawns claude (argv from ``launch``) in the agent's sandbox with the
prompt a stream-json line on stdin (kept open while a steerable turn runs:
``steering``), reads its events until its output ends (each one to the bus and
the turn record), and sums them into a :class:`TurnReport`. A run holds one of
the host's claude slots (:func:`claude_slot`) while it runs.
"""

from __future__ import annotations

import json
import logging
import math
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace

import anyio
from anyio.abc import ByteReceiveStream, Process

from hyperhive.agent import launch
from hyperhive.agent.active import ActiveAgent
from hyperhive.agent.agentlog import AgentLog
from hyperhive.agent.events import EventsBus, TurnStateName
from hyperhive.agent.sandbox import CLAUDE_OOM_SCORE_ADJ, signal_group
from hyperhive.agent.steering import INTERRUPT_GRACE_S, TurnInput
from hyperhive.agent.stream import (
    AssistantEvent,
    InitEvent,
    ResultEvent,
    StreamEvent,
    UserEvent,
    parse_line,
)
from hyperhive.agent.turnreport import TurnReport, summarize_turn
from hyperhive.atomic import atomic_write_text
from hyperhive.errors import HiveError
from hyperhive.framing import FrameDecoder
from hyperhive.taskgroups import sole_error

__all__ = ["claude_slot", "run_claude", "run_turn"]

log = logging.getLogger(__name__)

MAX_STREAM_LINE = 64 << 20
STEER_SETTLE_S = 30.0  # after a result, how long claude gets to start the round of a line unseen


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
        async with sole_error(), anyio.create_task_group() as tg:
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
