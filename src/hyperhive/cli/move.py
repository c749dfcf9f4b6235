"""hivectl agents move: an agent to another agent host, showing how far the move is.

The move is one request that answers when it is done (its turn may take minutes
to finish first). Beside it, on a terminal, a second request long-polls the
coordinator for the move's progress: its phase and the bytes copied so far.
Piped or under ``--json`` only the result is printed.
"""

from __future__ import annotations

import time

import anyio
import click

from hyperhive.cli.agents import agents
from hyperhive.cli.base import _Ctx, agent_argument, pass_ctx
from hyperhive.cli.output import StatusLine, emit, json_output
from hyperhive.errors import HiveError
from hyperhive.protocol import (
    MOVE_TIMEOUT,
    Moved,
    MoveProgress,
    OpAgentMoveReq,
    OpMoveProgressReq,
)

__all__ = ["agents_move", "progress_line", "size"]

PROGRESS_WAIT_S = 20.0


def size(n: int) -> str:
    """Bytes for a person: ``812 B``, ``1.4 MiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def progress_line(p: MoveProgress, waited: float) -> str:
    """The progress line a move shows in its phase: what it waits for, bytes so far."""
    prefix = f"moving {p.agent} to {p.target}"
    if p.phase == "draining":
        what = f"its turn finishes, then {p.source} packs it"
    elif p.phase == "uploading":
        total = f" of {size(p.size)}" if p.size is not None else ""
        what = f"uploading from {p.source}: {size(p.uploaded)}{total}"
    elif p.phase == "copying":
        whole = p.size or 0
        share = f" ({p.fetched * 100 // whole}%)" if whole else ""
        what = f"copying to {p.target}: {size(p.fetched)} of {size(whole)}{share}"
    elif p.phase == "starting":
        what = f"starting it on {p.target}"
    elif p.phase == "cleanup":
        what = f"{p.source} drops its copy"
    else:
        what = "starting the move"
    return f"{prefix}: {what} ({waited:.0f}s)"


@agents.command("move")
@agent_argument()
@click.option("--to", "to", required=True, help="The agent host to move it to.")
@json_output(Moved)
@pass_ctx
def agents_move(obj: _Ctx, name: str, to: str, as_json: bool) -> None:
    """Move agent NAME to agent host TO: its turn finishes, its inbox waits, its state/,
    home/ (claude's session), work/ and config go over the link, and it runs on TO.

    On a terminal a progress line shows the move's phase and the bytes copied."""
    status = StatusLine()
    moved = anyio.run(_move, obj, name, to, status)

    def human(m: Moved) -> None:
        if m.source is None:
            how = "it had never run, nothing to copy"
        elif m.shared_disk:
            how = f"from {m.source}; one disk for both, nothing copied"
        else:
            how = f"from {m.source}, {m.copied_bytes} bytes copied"
        state = "running" if m.running else "not running"
        click.echo(f"moved {name} to {m.target} ({how}); {state}")

    emit(moved, human)


async def _move(obj: _Ctx, name: str, to: str, status: StatusLine) -> Moved:
    began = time.monotonic()
    try:
        async with anyio.create_task_group() as tg:
            if status.live:
                tg.start_soon(_show_progress, obj, name, status, began)
            try:
                # As long as the coordinator gives the move (a turn to finish, then the
                # copy), not the usual 30 s: hanging up would undo a move that is only slow.
                moved = await obj.acall(
                    OpAgentMoveReq(cmd="agent_move", agent=name, to=to), MOVE_TIMEOUT + 30
                )
            finally:
                tg.cancel_scope.cancel()
                status.clear()
    except BaseExceptionGroup as group:
        # The move's refusal or failure as itself (its class is the exit code), not a group.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    return moved


async def _show_progress(obj: _Ctx, name: str, status: StatusLine, began: float) -> None:
    """Redraw the line on every change the coordinator reports, and each second."""
    latest = MoveProgress(agent=name, moving=False, version=-1, target=None)

    def draw() -> None:
        if latest.moving:
            status.show(progress_line(latest, time.monotonic() - began))

    async def tick() -> None:
        while True:
            draw()
            await anyio.sleep(1.0)

    async with anyio.create_task_group() as tg:
        tg.start_soon(tick)
        while True:
            try:
                latest = await obj.acall(
                    OpMoveProgressReq(
                        cmd="move_progress",
                        agent=name,
                        after=latest.version,
                        wait=PROGRESS_WAIT_S,
                    ),
                    PROGRESS_WAIT_S + 30,
                )
            except HiveError:
                # Progress is a nicety (an older coordinator has none): the move's own
                # answer still comes.
                tg.cancel_scope.cancel()
                return
            draw()
