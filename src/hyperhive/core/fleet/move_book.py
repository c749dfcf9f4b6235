"""The moves in progress on this coordinator: each one's state, and its progress as
``hivectl agents move`` follows it (every change bumps one version a follower waits on)."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from hyperhive.errors import Conflict, PermissionDenied
from hyperhive.protocol import MovePhase, MoveProgress

__all__ = ["Move", "MoveBook", "file_sha", "sha", "until"]


@dataclass
class Move:
    agent: str
    move_id: str
    source: str
    target: str
    spool: Path
    written: int = 0
    size: int = 0
    sha256: str = ""
    shared: bool = False
    error: str | None = None
    # What ``hivectl agents move`` shows while it waits (``MoveProgress``).
    phase: MovePhase = "draining"
    fetched: int = 0
    packed: anyio.Event = field(default_factory=anyio.Event)
    unpacked: anyio.Event = field(default_factory=anyio.Event)
    dropped: anyio.Event = field(default_factory=anyio.Event)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


async def until(event: anyio.Event, gone: anyio.Event | None) -> bool:
    """Wait for ``event`` or ``gone`` (a host's link ending); ``True``: ``event``."""
    if gone is None or gone.is_set():
        return event.is_set()
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            await gone.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        await event.wait()
        tg.cancel_scope.cancel()
    return event.is_set()


class MoveBook:
    """The active moves by agent, and a version that changes with any of them."""

    def __init__(self) -> None:
        self.active: dict[str, Move] = {}
        # Every change of any move bumps the version and fires the event (then replaced):
        # what a progress follower waits on.
        self._version = 0
        self._changed = anyio.Event()

    def moving(self, agent: str) -> bool:
        return agent in self.active

    def get(self, agent: str) -> Move | None:
        return self.active.get(agent)

    def begin(self, m: Move) -> None:
        self.active[m.agent] = m
        self.touch()

    def end(self, agent: str) -> None:
        """``agent``'s move is over (done or undone): followers see it no longer moving."""
        self.active.pop(agent, None)
        self.touch()

    def touch(self, m: Move | None = None, phase: MovePhase | None = None) -> None:
        if m is not None and phase is not None:
            m.phase = phase
        self._version += 1
        self._changed.set()
        self._changed = anyio.Event()

    def snapshot(self, agent: str) -> MoveProgress:
        m = self.active.get(agent)
        if m is None:
            return MoveProgress(agent=agent, moving=False, version=self._version)
        return MoveProgress(
            agent=agent,
            moving=True,
            version=self._version,
            source=m.source,
            target=m.target,
            phase=m.phase,
            size=m.size if m.packed.is_set() else None,
            uploaded=m.written,
            fetched=m.fetched,
        )

    async def progress(self, agent: str, after: int, wait: float) -> MoveProgress:
        """``agent``'s move as it stands once anything changed since version ``after``
        (at once if something did), or when ``wait`` seconds have passed."""
        deadline = time.monotonic() + wait
        while self._version == after:
            changed = self._changed
            with anyio.move_on_after(max(0.0, deadline - time.monotonic())) as scope:
                await changed.wait()
            if scope.cancelled_caught:
                break
        return self.snapshot(agent)

    def of(self, host: str, agent: str, move_id: str, role: str) -> Move:
        m = self.active.get(agent)
        if m is None or m.move_id != move_id:
            raise Conflict(f"no move {move_id} of {agent} is in progress here")
        if (m.source if role == "source" else m.target) != host:
            raise PermissionDenied(
                f"agent host {host!r} is not the {role} of {agent}'s move; refused"
            )
        return m
