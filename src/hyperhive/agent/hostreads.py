"""The host's side of the coordinator's reads: agents' logs, its journal, turn streams.

The coordinator has no view of this host's disk or memory (#14: no shared
disk), so it asks over the link (:mod:`hyperhive.protocol.hostreads`) and
this answers (the host's table, :mod:`.hostasks`, runs each ask on a task of
its own: a follower's long wait holds up no other command), each stream fed
one acknowledged batch at a time.
"""

from __future__ import annotations

import collections
import json
import logging
import time
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup
from pydantic import JsonValue

from hyperhive.agent.activation import Activation
from hyperhive.agent.logfiles import last_lines, lines_after
from hyperhive.client import RpcClient
from hyperhive.errors import HiveError, StorageError
from hyperhive.protocol.hostreads import (
    MAX_BATCH,
    EventsFollowCmd,
    HostTail,
    LinkStreamEndReq,
    LinkStreamItemsReq,
    LogTailAsk,
)

__all__ = ["HostReads", "JournalRing"]

log = logging.getLogger(__name__)

# How often a follower's wait looks at the log file again (the host's own disk).
FOLLOW_EVERY = 0.2


class JournalRing(logging.Handler):
    """The host's recent log records, for ``get_host_journal`` when no file keeps them
    (a host under systemd or Kubernetes logs to its journal, not to ``logs/host.log``)."""

    def __init__(self, keep: int = 1000) -> None:
        super().__init__(logging.INFO)
        self.lines: collections.deque[str] = collections.deque(maxlen=keep)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(self.format(record))
        except Exception:  # a logging handler must never raise into the caller
            self.handleError(record)


class HostReads:
    """The coordinator's reads of this host: agents' logs, its journal, turn streams."""

    def __init__(self, host_id: str, logs: Path, max_frame: int) -> None:
        self.host_id = host_id
        self.logs = logs
        # An answer's lines fit in half a frame: the envelope and escaping have room.
        self.budget = max_frame // 2
        self.journal = JournalRing()
        self._streams: dict[int, anyio.CancelScope] = {}

    # ---- asks (each a handler of the host's table) -----------------------------------

    async def log_tail(self, ask: LogTailAsk) -> HostTail:
        """The last lines of an agent's log, or those written after a cursor (waiting a
        while for one); an unreadable log is said, never the host's end."""
        try:
            return await self._log_tail(ask)
        except OSError as exc:
            raise StorageError(f"agent host {self.host_id} cannot read it: {exc}") from exc

    async def journal_tail(self, lines: int) -> list[str]:
        """The host's own log, last ``lines`` of it."""
        try:
            return await anyio.to_thread.run_sync(self._journal, lines)
        except OSError as exc:
            raise StorageError(f"agent host {self.host_id} cannot read it: {exc}") from exc

    async def _log_tail(self, cmd: LogTailAsk) -> HostTail:
        path = self.logs / "agents" / f"{cmd.agent}.log"
        if cmd.after is None:
            tail = await anyio.to_thread.run_sync(last_lines, path, cmd.lines, self.budget)
            return HostTail(lines=tail.lines, cursor=tail.cursor, found=tail.found)
        deadline = time.monotonic() + cmd.wait
        while True:
            tail = await anyio.to_thread.run_sync(lines_after, path, cmd.after, self.budget)
            if tail.lines or time.monotonic() >= deadline:
                return HostTail(lines=tail.lines, cursor=tail.cursor, found=tail.found)
            await anyio.sleep(FOLLOW_EVERY)

    def _journal(self, lines: int) -> list[str]:
        # Under ``hivectl up`` the host's console (tracebacks too) is logs/host.log.
        path = self.logs / "host.log"
        tail = last_lines(path, lines, self.budget)
        return tail.lines if tail.found else list(self.journal.lines)[-lines:]

    # ---- streams ---------------------------------------------------------------------

    def follow(
        self, cmd: EventsFollowCmd, agent: Activation | None, link: RpcClient, tg: TaskGroup
    ) -> None:
        """Feed ``agent``'s events on ``cmd.stream`` (in a task; registered now, so a stop
        that follows at once finds it)."""
        scope = self._streams[cmd.stream] = anyio.CancelScope()
        tg.start_soon(self._feed_events, cmd, agent, link, scope)

    def stop(self, stream: int) -> None:
        """The coordinator's reader of ``stream`` went away."""
        scope = self._streams.pop(stream, None)
        if scope is not None:
            scope.cancel()

    def stop_all(self) -> None:
        """The link closed: its streams have nobody to feed."""
        for scope in self._streams.values():
            scope.cancel()
        self._streams.clear()

    async def _feed_events(
        self,
        cmd: EventsFollowCmd,
        rt: Activation | None,
        link: RpcClient,
        scope: anyio.CancelScope,
    ) -> None:
        reason = f"{cmd.agent} is not active on agent host {self.host_id}"
        try:
            with scope:
                if rt is not None:
                    failed = await self._relay(rt, cmd.stream, link)
                    if failed is not None:
                        log.debug("stream %s for %s ended: %s", cmd.stream, cmd.agent, failed)
                        return  # the link or the stream is gone: nobody to tell
                    reason = f"{cmd.agent} stopped on agent host {self.host_id}"
            if scope.cancel_called:
                return  # the coordinator stopped it: nobody to tell
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await link.call(
                    LinkStreamEndReq(cmd="stream_end", stream=cmd.stream, reason=reason)
                )
        except HiveError as exc:
            log.debug("stream %s for %s ended: %s", cmd.stream, cmd.agent, exc)
        except Exception:  # contained: one viewer's stream never ends the host
            log.exception("streaming %s's events failed", cmd.agent)
        finally:
            self._streams.pop(cmd.stream, None)

    async def _relay(self, rt: Activation, stream: int, link: RpcClient) -> HiveError | None:
        """``rt``'s events, history first, until it stops (``None``) or the feed fails (the
        error). A viewer that falls behind loses events at the bus (as the host's own SSE
        does), never stalls the agent."""
        failed: HiveError | None = None
        async with anyio.create_task_group() as tg, rt.bus.subscribe(replay=True) as events:

            async def until_done() -> None:
                await rt.lifetime.done.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(until_done)
            # Caught inside the group: raised through it, it would be an ExceptionGroup.
            try:
                async for first in events:
                    batch, size = [self._fit(first)], 0
                    while len(batch) < MAX_BATCH and size < self.budget // 2:
                        try:
                            event = self._fit(events.receive_nowait())
                        except anyio.WouldBlock:
                            break
                        batch.append(event)
                        size += len(json.dumps(event))
                    await link.call(
                        LinkStreamItemsReq(cmd="stream_items", stream=stream, items=batch)
                    )
            except HiveError as exc:
                failed = exc
            tg.cancel_scope.cancel()
        return failed

    def _fit(self, event: dict[str, Any]) -> dict[str, JsonValue]:
        """``event`` as JSON, or a note in its place if it could never fit a frame."""
        text = json.dumps(event, default=str)
        if len(text) > self.budget // 2:
            return {
                "seq": event.get("seq"),
                "kind": "dropped",
                "at": event.get("at"),
                "message": (
                    f"a {event.get('kind')} event of {len(text)} bytes is too large to relay; "
                    "the agent's log has the turn"
                ),
            }
        fitted: dict[str, JsonValue] = json.loads(text)
        return fitted
