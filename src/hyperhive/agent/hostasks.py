"""The agent host's side of the host link: one handler per thing the coordinator pushes.

``HOST_TABLE`` is sealed at import (:mod:`hyperhive.dispatch`): a member of
``protocol.link.LinkCommand`` with no handler, a handler of something the
coordinator never pushes, or a handler whose return annotation is not the
answer its request names, and this module does not import.

Two kinds of member:

- a *command* (``Req[None]``: activate, deactivate, place, the moves, the event
  streams) is handled in the order the link brought it (a ``place`` after its
  ``activate``), so its handler never waits long: what takes time (a move's
  upload, a stream) goes to a task;
- an *ask* (:class:`~hyperhive.protocol.hostreads.Ask`: the coordinator's reads and
  its work in agents' directories) is answered by :func:`answer`, on a task of its
  own: its handler's result, encoded as the ask's model, goes back in ``answer``.

Adding an ask: its request and answer models (``protocol/``, the request an
``Ask[Answer]`` in ``LinkCommand``), its handler here, its test.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVarTuple

from hyperhive.agent.activation import Activation
from hyperhive.agent.active import ActiveAgent
from hyperhive.agent.hostdisk import AgentDisk
from hyperhive.agent.hostreads import HostReads
from hyperhive.agent.moving import HostMoves
from hyperhive.client import RpcClient
from hyperhive.dispatch import Dispatcher
from hyperhive.errors import HiveError, InternalError, NotFound, StorageError
from hyperhive.protocol import (
    ActivateCmd,
    DeactivateCmd,
    ErrorInfo,
    LinkCommand,
    MetaChangedAsk,
    MoveDropCmd,
    MoveInCmd,
    MoveOutCmd,
    PlaceCmd,
    result_adapter,
)
from hyperhive.protocol.hostdisk import (
    AgentTrashAsk,
    MirrorsKeepAsk,
    MirrorsKept,
    MirrorWriteAsk,
    RepoAclAsk,
    RepoFile,
    RepoShowAsk,
    ReposMissingAsk,
    RepoWriteAsk,
    RepoWritten,
    Trashed,
)
from hyperhive.protocol.hostreads import (
    AgentSnapshot,
    AgentSnapshotAsk,
    Ask,
    EventsFollowCmd,
    HostJournalAsk,
    HostTail,
    LinkAnswerReq,
    LogTailAsk,
    StreamStopCmd,
)

__all__ = ["HOST_TABLE", "CommandedHost", "answer"]

log = logging.getLogger(__name__)

Args = TypeVarTuple("Args")


class CommandedHost(Protocol):
    """What the coordinator's commands and asks act on: the agent host (``agent/host.py``)."""

    @property
    def host_id(self) -> str: ...

    @property
    def disk(self) -> AgentDisk: ...

    @property
    def reads(self) -> HostReads: ...

    @property
    def moves(self) -> HostMoves: ...

    def agent(self, name: str) -> ActiveAgent | None: ...

    def activation(self, name: str) -> Activation | None: ...

    async def activate(self, cmd: ActivateCmd) -> None: ...

    async def deactivate(self, name: str, graceful: bool = ...) -> None: ...

    def place(self, name: str, parent: str | None, descendants: tuple[str, ...]) -> None: ...

    def in_background(
        self, fn: Callable[[*Args], Coroutine[Any, Any, object]], *args: *Args
    ) -> None:
        """Run ``fn(*args)`` in the host's task group (nothing waits for it)."""
        ...

    def follow(self, cmd: EventsFollowCmd) -> None:
        """Feed ``cmd``'s stream of an agent's events on the current link."""
        ...


HOST_TABLE: Dispatcher[CommandedHost] = Dispatcher("agent host", LinkCommand)

# ---- commands: in the link's order ---------------------------------------------------


@HOST_TABLE.on(ActivateCmd)
async def _activate(host: CommandedHost, cmd: ActivateCmd) -> None:
    await host.activate(cmd)


@HOST_TABLE.on(DeactivateCmd)
async def _deactivate(host: CommandedHost, cmd: DeactivateCmd) -> None:
    if cmd.fenced:
        log.warning("agent %s fenced by the coordinator: %s", cmd.agent, cmd.fenced)
    await host.deactivate(cmd.agent, graceful=cmd.graceful and not cmd.fenced)


@HOST_TABLE.on(PlaceCmd)
async def _place(host: CommandedHost, cmd: PlaceCmd) -> None:
    host.place(cmd.agent, cmd.parent, tuple(cmd.descendants))


# Moves in tasks: an upload or a fetch is many round trips on this very link.
@HOST_TABLE.on(MoveOutCmd)
async def _move_out(host: CommandedHost, cmd: MoveOutCmd) -> None:
    host.in_background(host.moves.move_out, cmd)


@HOST_TABLE.on(MoveInCmd)
async def _move_in(host: CommandedHost, cmd: MoveInCmd) -> None:
    host.in_background(host.moves.move_in, cmd)


@HOST_TABLE.on(MoveDropCmd)
async def _move_drop(host: CommandedHost, cmd: MoveDropCmd) -> None:
    host.in_background(host.moves.drop, cmd)


@HOST_TABLE.on(EventsFollowCmd)
async def _events_follow(host: CommandedHost, cmd: EventsFollowCmd) -> None:
    host.follow(cmd)


@HOST_TABLE.on(StreamStopCmd)
async def _stream_stop(host: CommandedHost, cmd: StreamStopCmd) -> None:
    host.reads.stop(cmd.stream)


# ---- asks: each answered once, on a task of its own -----------------------------------


@HOST_TABLE.on(MetaChangedAsk)
async def _meta_changed(host: CommandedHost, ask: MetaChangedAsk) -> None:
    if (agent := host.agent(ask.agent)) is not None:
        agent.meta.forget()


@HOST_TABLE.on(AgentSnapshotAsk)
async def _agent_snapshot(host: CommandedHost, ask: AgentSnapshotAsk) -> AgentSnapshot:
    activation = host.activation(ask.agent)
    if activation is None:
        raise NotFound(f"{ask.agent} is not active on agent host {host.host_id}")
    return activation.snapshot()


@HOST_TABLE.on(LogTailAsk)
async def _log_tail(host: CommandedHost, ask: LogTailAsk) -> HostTail:
    return await host.reads.log_tail(ask)


@HOST_TABLE.on(HostJournalAsk)
async def _host_journal(host: CommandedHost, ask: HostJournalAsk) -> list[str]:
    return await host.reads.journal_tail(ask.lines)


@HOST_TABLE.on(RepoWriteAsk)
async def _repo_write(host: CommandedHost, ask: RepoWriteAsk) -> RepoWritten:
    return await host.disk.write_repo(ask)


@HOST_TABLE.on(RepoShowAsk)
async def _repo_show(host: CommandedHost, ask: RepoShowAsk) -> RepoFile:
    return await host.disk.show_repo(ask)


@HOST_TABLE.on(ReposMissingAsk)
async def _repos_missing(host: CommandedHost, ask: ReposMissingAsk) -> list[str]:
    return await host.disk.missing_repos(ask)


@HOST_TABLE.on(RepoAclAsk)
async def _repo_acl(host: CommandedHost, ask: RepoAclAsk) -> None:
    await host.disk.set_acls(ask)


@HOST_TABLE.on(AgentTrashAsk)
async def _agent_trash(host: CommandedHost, ask: AgentTrashAsk) -> Trashed:
    return await host.disk.trash_agent(ask)


@HOST_TABLE.on(MirrorsKeepAsk)
async def _mirrors_keep(host: CommandedHost, ask: MirrorsKeepAsk) -> MirrorsKept:
    return await host.disk.keep_mirrors(ask)


@HOST_TABLE.on(MirrorWriteAsk)
async def _mirror_write(host: CommandedHost, ask: MirrorWriteAsk) -> RepoWritten:
    return await host.disk.write_mirror(ask)


HOST_TABLE.seal()


async def answer(host: CommandedHost, ask: Ask[Any], link: RpcClient) -> None:
    """Answer ``ask`` on ``link``: its handler's result as the ask's model, or the error
    it met (a failure here is contained: this host runs on)."""
    try:
        result = await HOST_TABLE(host, ask)
        reply = LinkAnswerReq(
            cmd="answer",
            ask=ask.ask,
            result=result_adapter(type(ask)).dump_python(result, mode="json"),
        )
    except HiveError as exc:
        reply = _error(ask.ask, exc)
    except OSError as exc:  # a disk the handler did not expect to fail: said, with the host
        reply = _error(
            ask.ask,
            StorageError(f"agent host {host.host_id} could not do {ask.cmd}{ask.subject()}: {exc}"),
        )
    except Exception as exc:  # contained like an agent's crash
        log.exception("answering the coordinator's %s failed", ask.cmd)
        reply = _error(
            ask.ask, InternalError(f"agent host {host.host_id}: {type(exc).__name__}: {exc}")
        )
    try:
        try:
            await link.call(reply)
        except HiveError as exc:
            if link.closed:
                raise
            # Refused (too large, say): the coordinator still hears why.
            await link.call(_error(ask.ask, exc))
    except HiveError as exc:
        log.debug("could not answer the coordinator's %s: %s", ask.cmd, exc)


def _error(ask: int, exc: HiveError) -> LinkAnswerReq:
    return LinkAnswerReq(cmd="answer", ask=ask, error=ErrorInfo(code=exc.code, message=exc.message))
