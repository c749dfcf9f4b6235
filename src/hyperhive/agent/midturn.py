"""The harness's wait, kept going while a turn runs: mail that arrives mid-turn goes in.

Between turns the harness long-polls the coordinator's ``wait``. While a turn
runs it polls too (:meth:`Wakes.poll_during`), and a message that arrives is
offered to the running turn as a user line (:meth:`~.turns.Turns.offer`), so
a child's reply reaches its manager's model in the turn that waits for it
rather than in a new one.

At-least-once is kept: a message counts as delivered when the model saw it
(claude echoed the line back and a model answer followed,
:attr:`~.steering.TurnInput.seen_ids`), and is acked with the turn's
``turn_end`` like the mail that woke it; one offered but never seen (the turn
ended first), or that arrived after the turn, wakes the next turn
(:meth:`Wakes.taken`, :meth:`Wakes.next`). A turn that fails acks none of it,
and the new incarnation brings it all back.

A poll is never cancelled while the coordinator may be answering it (the
answer would be lost with its messages marked delivered): one still running
when the turn ends is the loop's next wait (:meth:`Wakes.next` awaits it).
Anything else it brings (a stop, a todo change, a compaction) waits for the
loop after the turn, as it would have without it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import anyio
from anyio.abc import TaskStatus

from hyperhive.agent.events import EventsBus
from hyperhive.agent.turns import Turns
from hyperhive.client import RpcClient
from hyperhive.errors import HiveError
from hyperhive.protocol import Message, WaitReq, WaitResult
from hyperhive.telemetry import untraced

__all__ = ["Wakes", "merged", "midturn_text"]


def midturn_text(messages: Sequence[Message]) -> str:
    """The user line a running turn gets for mail that arrived while it ran."""
    lines = ["More messages arrived while you work:"]
    lines.extend(m.render() for m in messages)
    lines.append("(Acked when this turn ends cleanly, like the ones that woke it.)")
    return "\n".join(lines) + "\n"


def merged(first: WaitResult, then: WaitResult) -> WaitResult:
    """Two wakes as one: both's messages (once each), the newer todo version, any flag."""
    ids = {m.id for m in first.messages}
    return WaitResult(
        messages=[*first.messages, *(m for m in then.messages if m.id not in ids)],
        todo_version=max(first.todo_version, then.todo_version),
        todos_changed=first.todos_changed or then.todos_changed,
        stop=first.stop or then.stop,
        held=first.held or then.held,
        compact=first.compact or then.compact,
    )


def _has_news(woke: WaitResult) -> bool:
    return bool(woke.messages) or woke.todos_changed or woke.stop or woke.compact


class Wakes:
    """The harness's wait across turns: what a poll during a turn brought, and kept."""

    __slots__ = ("_bus", "_kept", "_offered", "_polling", "_turns", "wait_seconds")

    def __init__(self, turns: Turns, bus: EventsBus, wait_seconds: float) -> None:
        self._turns = turns
        self._bus = bus
        self.wait_seconds = wait_seconds
        self._kept: WaitResult | None = None  # news no turn has taken yet
        self._offered: list[Message] = []  # offered to the running turn, in order
        self._polling: anyio.Event | None = None  # set once the running poll has answered

    def forget(self) -> None:
        """A new incarnation redelivers whatever was not acked: nothing offered is owed.

        What was kept stays: a poll may have brought the redelivery itself, and the
        same messages polled again are merged by id (:func:`merged`), never doubled.
        """
        self._offered = []

    async def next(self, rpc: RpcClient, todo_version: int) -> WaitResult:
        """The loop's wait: a poll still running first, then anything kept, else a long-poll."""
        if self._polling is not None:
            await self._polling.wait()
        kept, self._kept = self._kept, None
        if kept is not None and _has_news(kept):
            # Kept news wakes a turn now; the coordinator may have more for it too.
            more = await rpc.call(WaitReq(cmd="wait", timeout=0, todo_version=kept.todo_version))
            return merged(kept, more)
        version = kept.todo_version if kept is not None else todo_version
        return await rpc.call(WaitReq(cmd="wait", timeout=self.wait_seconds, todo_version=version))

    async def poll_during(
        self,
        rpc: RpcClient,
        todo_version: int,
        ended: anyio.Event,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Poll while the turn runs (until ``ended``): offer its mail, keep the rest.

        Started (``tg.start``) in a task group that outlives the turn: a poll in
        flight at the turn's end finishes, and its answer is kept for :meth:`next`.
        """
        done = anyio.Event()
        self._polling = done
        self._offered = []
        task_status.started()
        try:
            # A long-poll like those between turns: not part of the turn's trace (it outlives it).
            with untraced():
                while True:
                    try:
                        woke = await rpc.call(
                            WaitReq(
                                cmd="wait", timeout=self.wait_seconds, todo_version=todo_version
                            )
                        )
                    except HiveError:
                        return  # the link went: the loop meets that itself, then a new incarnation

                    unseen = woke.messages
                    if woke.messages and not ended.is_set():
                        ids = [m.id for m in woke.messages]
                        if await self._turns.offer(midturn_text(woke.messages), ids):
                            self._offered.extend(woke.messages)
                            self._bus.emit("mail_offered", ids=ids)
                            unseen = []
                    rest = woke.model_copy(update={"messages": unseen})
                    if ended.is_set() or _has_news(rest):
                        self._keep(rest)  # a stop, a todo change, a compaction: after the turn
                        return
                    todo_version = woke.todo_version
        finally:
            self._polling = None
            done.set()

    def taken(self, seen: Collection[int], todo_version: int) -> list[int]:
        """After the turn: the ids offered to it that claude took in (ack them with it);
        the others are kept for the next turn (``todo_version``: the loop's)."""
        taken = [m.id for m in self._offered if m.id in seen]
        missed = [m for m in self._offered if m.id not in seen]
        self._offered = []
        if missed:
            self._keep(WaitResult(messages=missed, todo_version=todo_version))
        return taken

    def _keep(self, woke: WaitResult) -> None:
        self._kept = woke if self._kept is None else merged(self._kept, woke)
