"""``hivectl agents move NAME --to H``: an agent, its files and its claude session,
from one agent host to another over the host link.

The steps, each recorded in the store before it is taken (``placements.move_phase``)
so a coordinator that restarts mid-move resolves it:

1. ``draining``: the agent is stopped on its source (its inbox fenced, its turn
   finishes); the source packs ``state/``, ``home/``, ``work/`` and ``config/``
   and uploads the archive here in checksummed chunks (spooled under ``run/moves``).
2. ``copying``: the target fetches the archive, checks it, unpacks it beside its
   agents and renames it into place.
3. commit (``commit_move``, phase ``cleanup``): the agent is assigned to the target
   and activated there with incarnation + 1, so the link refuses the source for it;
   then the source drops its copy and the move ends.

Before the commit nothing is lost: any failure (a host gone, a bad checksum, the
coordinator restarting) undoes the move and the agent stays on its source. After
it the agent runs on the target; a source that is away drops its copy when it
comes back. Never neither host, never both.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from pathlib import Path

import anyio
import stamina

from hyperhive.config import HivePaths
from hyperhive.core.fleet.hostlink import HostLink
from hyperhive.core.fleet.move_book import Move, MoveBook, until
from hyperhive.core.fleet.move_reports import MoveIntake
from hyperhive.core.fleet.placement import MOVING_PHASES, Placement
from hyperhive.core.state.agent_state import AgentState
from hyperhive.core.state.registry import AgentRegistry
from hyperhive.errors import Conflict, Unavailable
from hyperhive.protocol import (
    MOVE_TIMEOUT,
    Moved,
    MoveDropCmd,
    MoveInCmd,
    MoveOutCmd,
    MoveProgress,
    Req,
)
from hyperhive.store.base import PlacementRepo

__all__ = ["MOVE_TIMEOUT", "Mover"]

log = logging.getLogger(__name__)

DROP_TIMEOUT = 60.0


class Mover:
    """The operator's moves, start to end, and their resolution after a restart (what
    hosts report of them goes to ``move_reports.MoveIntake``)."""

    def __init__(
        self,
        paths: HivePaths,
        registry: AgentRegistry,
        hostlink: HostLink,
        placement: Placement,
        assignments: PlacementRepo,
        agent_state: AgentState,
        placed: Callable[[], None] = lambda: None,
    ) -> None:
        self.paths = paths
        # Told when a move ends (or is undone): the config mirrors follow the agent.
        self.placed = placed
        self.registry = registry
        self.hostlink = hostlink
        self.placement = placement
        self.assignments = assignments
        self.agent_state = agent_state
        self.book = MoveBook()
        hostlink.serve_moves(MoveIntake(self.book, assignments))

    async def progress(self, agent: str, after: int, wait: float) -> MoveProgress:
        """``agent``'s move as it stands once anything changed since version ``after``
        (at once if something did), or when ``wait`` seconds have passed."""
        return await self.book.progress(agent, after, wait)

    @property
    def spool_dir(self) -> Path:
        # Not ``run/moves``: that is a host's own spool, and `hivectl up`'s local host
        # shares this run dir. Both spooling ``<id>.tar`` there made the coordinator
        # append each uploaded chunk to the archive the source was still reading: the
        # upload never ended.
        return self.paths.run / "coordinator-moves"

    # ---- the operator's move ---------------------------------------------------------

    async def move(self, agent: str, target: str) -> Moved:
        self.registry.require(agent)
        await self.placement.check_pin(target)
        if not self.hostlink.connected(target):
            raise Unavailable(
                f"agent host {target!r} is not connected; start it (`hivectl host …`) and "
                "move again"
            )
        if self.book.moving(agent):
            raise Conflict(f"{agent} is already moving; wait for that move to finish")
        assigned = await self.assignments.get(agent)
        if assigned is None:  # never placed: nothing to copy, it starts there
            await self.assignments.assign(agent, target, pinned=False)
            self.placed()
            running = await self._start(agent)
            return Moved(agent=agent, source=None, target=target, copied_bytes=0, running=running)
        source = assigned.host
        if source == target:
            raise Conflict(f"{agent} is already on agent host {target!r}")
        if not self.hostlink.connected(source):
            raise Unavailable(
                f"{agent}'s files are on agent host {source!r}, which is not connected; a "
                "move needs both hosts up (or start it there first)"
            )
        move_id = secrets.token_hex(8)
        await self.assignments.begin_move(agent, move_id, target)
        self.spool_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        m = Move(agent, move_id, source, target, self.spool_dir / f"{move_id}.tar")
        self.book.begin(m)
        try:
            with anyio.fail_after(MOVE_TIMEOUT):
                await self._copy(m)
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await self._undo(m, exc)
            raise
        finally:
            m.spool.unlink(missing_ok=True)
        try:
            self.book.touch(m, "starting")
            return await self._commit(m)
        finally:
            self.book.end(agent)
            self.placed()

    async def _copy(self, m: Move) -> None:
        log.info("moving %s from %s to %s (move %s)", m.agent, m.source, m.target, m.move_id)
        await self.hostlink.deactivate(m.agent, graceful=True)
        m.spool.write_bytes(b"")
        await self._push(m.source, MoveOutCmd(cmd="move_out", agent=m.agent, move_id=m.move_id))
        await self._wait(m, m.packed, m.source)
        await self.assignments.move_phase(m.agent, m.move_id, "copying")
        self.book.touch(m, "copying")
        await self._push(
            m.target,
            MoveInCmd(
                cmd="move_in", agent=m.agent, move_id=m.move_id, size=m.size, sha256=m.sha256
            ),
        )
        await self._wait(m, m.unpacked, m.target)

    async def _commit(self, m: Move) -> Moved:
        await self.assignments.commit_move(m.agent, m.move_id)
        log.info("moved %s to %s; it runs there from now", m.agent, m.target)
        running = await self._start(m.agent)
        if m.shared:
            await self.assignments.end_move(m.agent, m.move_id)
            return self._moved(m, running)
        self.book.touch(m, "cleanup")
        if await self.hostlink.push(
            m.source, MoveDropCmd(cmd="move_drop", agent=m.agent, move_id=m.move_id)
        ):
            # Not dropped in time (or the source went): the phase stays ``cleanup`` and
            # the source is told again when it next registers.
            with anyio.move_on_after(DROP_TIMEOUT):
                await until(m.dropped, self.hostlink.gone(m.source))
        return self._moved(m, running)

    @staticmethod
    def _moved(m: Move, running: bool) -> Moved:
        return Moved(
            agent=m.agent,
            source=m.source,
            target=m.target,
            copied_bytes=m.size,
            running=running,
            shared_disk=m.shared,
        )

    async def _start(self, agent: str) -> bool:
        if await self.agent_state.desired_running(agent) and not self.hostlink.running(agent):
            await self.placement.try_activate(agent)
        return self.hostlink.running(agent)

    async def _undo(self, m: Move, why: BaseException) -> None:
        reason = m.error or str(why) or type(why).__name__
        log.error(
            "move of %s to %s undone (%s); it stays on %s", m.agent, m.target, reason, m.source
        )
        self.book.end(m.agent)
        try:
            await self.assignments.end_move(m.agent, m.move_id)
            await self._start(m.agent)
        except Unavailable as exc:  # the store is away: the restart's resolve undoes it
            log.error("could not record the undone move of %s yet: %s", m.agent, exc)
        self.placed()

    async def _push(self, host: str, cmd: Req[None]) -> None:
        if not await self.hostlink.push(host, cmd):
            raise Unavailable(f"agent host {host!r} went away mid-move")

    async def _wait(self, m: Move, event: anyio.Event, host: str) -> None:
        """Until ``event``; a host that goes or reports an error fails the move."""
        if not await until(event, self.hostlink.gone(host)):
            m.error = m.error or f"agent host {host!r} went away mid-move"
        if m.error is not None:
            raise Unavailable(f"moving {m.agent} failed: {m.error}; it stays on {m.source}")

    # ---- after a restart, or a source's return ---------------------------------------

    async def host_registered(self, host: str) -> None:
        """Resolve moves this coordinator did not see through: a move not committed is
        undone (the agent belongs on its source); a committed one whose source is this
        host tells it to drop its copy."""
        # The store may be away (a database restart, a failover): wait for it with
        # jittered backoff, as placement does, rather than take the coordinator down.
        # A retry after a partial pass is safe: resolved rows no longer carry a move.
        async for attempt in stamina.retry_context(
            on=Unavailable, attempts=None, timeout=None, wait_initial=0.5, wait_max=5.0
        ):
            with attempt:
                try:
                    await self._resolve_moves(host)
                except Unavailable as exc:
                    log.warning("agent host %s: cannot resolve moves yet: %s", host, exc)
                    raise

    async def _resolve_moves(self, host: str) -> None:
        for row in await self.assignments.all():
            if row.move_id is None or self.book.moving(row.agent):
                continue
            if row.move_phase in MOVING_PHASES:
                log.warning(
                    "undoing %s's unfinished move to %s (the coordinator restarted mid-move)",
                    row.agent,
                    row.move_to,
                )
                await self.assignments.end_move(row.agent, row.move_id)
            elif row.move_phase == "cleanup" and row.move_from == host:
                log.info("telling agent host %s to drop its copy of %s", host, row.agent)
                await self.hostlink.push(
                    host, MoveDropCmd(cmd="move_drop", agent=row.agent, move_id=row.move_id)
                )
