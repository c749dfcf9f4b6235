"""The turn loop: wait for something, run one ``claude --print`` turn, sleep again.

1. Long-poll the coordinator's ``wait`` on the agent's own socket.
2. Take one of the host's claude slots (``WaitingSlot`` while queued; a
   graceful stop while queued leaves the queue and ends the loop, the mail
   unacked). Build the wake prompt; spawn the real claude (argv from
   ``launch``) in the agent's sandbox, the prompt a stream-json line on a
   stdin kept open while the turn runs (``steering``: an operator's interrupt
   and text, and mail that arrives meanwhile, ``midturn``, go in there);
   stream its events to the bus (one run of claude: ``clauderun``).
3. Ack the messages that woke the turn (and those it took in mid-turn) only
   if it ended cleanly; otherwise start a new incarnation (after a backoff;
   none after the operator's interrupt) so they are delivered again.
   "Not logged in" is no failure to retry: the agent takes no turns until
   its credentials change (``hivectl login``) or it is restarted; nor is a
   claude its sandbox cannot start (``agent.claudecheck``).
   The turn's end goes to the coordinator (``turnend``), and is resent after a
   reconnect if it was never answered.
4. Above the watermark, or when a compact was requested: a notes-checkpoint
   turn, then ``/compact`` (``compaction``).
5. A fence (graceful stop) ends the loop after the current turn. An agent the stop
   finds idle first gets its flush turn (``flush``; ``flush_on_stop``, on by default): one
   short turn to save what it needs to its notes, cut by the stop's grace like
   any turn. Not for an agent that never had a session (nothing in context to
   save), nor after a turn the stop already let finish (that turn was its last),
   nor for one over budget (it takes no turn of any kind).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio

from hyperhive.agent.active import ActiveAgent
from hyperhive.agent.admission import Abandoned
from hyperhive.agent.claudecheck import hold_while_claude_unrunnable, launch_problem_of
from hyperhive.agent.clauderun import claude_slot, run_turn
from hyperhive.agent.compaction import compact
from hyperhive.agent.flush import flush, owes_flush
from hyperhive.agent.midturn import Wakes
from hyperhive.agent.outage import Outage, redial_delay
from hyperhive.agent.prompt import wake_prompt
from hyperhive.agent.session import load_session, next_session
from hyperhive.agent.turnend import TurnEnds, run_spend
from hyperhive.agent.turntrace import turn_span
from hyperhive.client import RpcClient, connect
from hyperhive.credentials import LOGIN_REMEDY, fingerprint
from hyperhive.errors import Unavailable
from hyperhive.protocol import AttachReq, FenceReq, TurnEndReq, WaitReq, WaitResult
from hyperhive.taskgroups import first_set, sole_error

__all__ = ["run_harness"]

log = logging.getLogger(__name__)

WAIT_SECONDS = 60.0
BACKOFF = (1.0, 2.0, 5.0, 15.0, 60.0)
RECONNECT_SECONDS = 0.5
RECONNECT_MAX_SECONDS = 2.0  # the wait doubles up to this while the coordinator is away
LOGIN_POLL_SECONDS = 1.0


class _Loop:
    """The turn loop's state, kept across reconnects to a restarted coordinator."""

    def __init__(self, agent: ActiveAgent) -> None:
        self.agent = agent
        self.session_id = load_session(agent.spec)
        agent.bus.set_session(self.session_id)
        self.version = 0
        self.failures = 0
        self.attached = False
        self.turn_ends = TurnEnds(agent)
        self.wakes = Wakes(agent.turns, agent.bus, WAIT_SECONDS)

    async def serve(self, rpc: RpcClient, attached: Callable[[], None] = lambda: None) -> None:
        agent = self.agent
        # After a lost connection, first settle the turn that already ran (ack its
        # mail), then start a new incarnation: anything the coordinator marked
        # delivered whose answer never reached us (it died mid-reply) comes back.
        await self.turn_ends.settle(rpc)
        await rpc.call(AttachReq(cmd="attach"))
        self.wakes.forget()  # the new incarnation brings back whatever was kept
        self.attached = True
        attached()
        if agent.lifetime.stopping.is_set():
            await rpc.call(FenceReq(cmd="fence"))  # a graceful stop survives the reconnect
        try:
            # The tasks a turn leaves polling for mail (midturn) live as long as the link.
            async with sole_error(), anyio.create_task_group() as self._polls:
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
                if idle_at_stop and not woke.held and owes_flush(agent, self.session_id):
                    self.session_id = await flush(agent, rpc, self.session_id, self.turn_ends)
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
                await compact(agent, rpc, self.session_id, self.turn_ends)

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
            self.session_id = next_session(agent, self.session_id, report)
            clean = report.outcome == "ok"
            # What claude took in mid-turn is acked with the turn; the rest waits for the next.
            taken = self.wakes.taken(steered.seen_ids, self.version)
            end = await self.turn_ends.send(
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
            if lifetime.stopping.is_set() and not loop.turn_ends.owed:
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
                await first_set(*ends)
            if lifetime.killed.is_set():
                break  # stopped by its host (a fence, a kill): not a crash
    agent.bus.set_state("stopped")
