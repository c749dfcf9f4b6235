"""The agent host's link to the coordinator: dialled, registered, kept alive, listened to.

A local host links over ``run/hosts.sock``; a remote one dials the
coordinator's network link (``hyperhive.netlink``). Once linked, the host
registers (its id, capacity and the agents it still runs), renews its lease
by heartbeat, and takes the coordinator's pushes: a command by its handler in
the sealed ``HOST_TABLE``, an ask answered in a task of its own. A lost link
is redialled for ever, with jitter (after a failover every host reconnects at
once); the agents run on meanwhile.
"""

from __future__ import annotations

import logging
import math
import random
from typing import Any, Protocol

import anyio
import stamina
from anyio.abc import TaskGroup, TaskStatus
from pydantic import TypeAdapter, ValidationError

from hyperhive.agent.hostasks import HOST_TABLE, CommandedHost, answer
from hyperhive.agent.outage import Outage
from hyperhive.agent.versions import HostVersions
from hyperhive.client import RpcClient, connect
from hyperhive.config import HiveConfig, HivePaths
from hyperhive.errors import HiveError, Unavailable
from hyperhive.netlink.dialer import LinkRefused, LinkTarget, dial
from hyperhive.netlink.lease import HEARTBEATS_PER_LEASE
from hyperhive.protocol import LinkCommand, LinkHeartbeatReq, LinkRegisterReq, Req
from hyperhive.protocol.hostreads import Ask
from hyperhive.sysusers import adopt_hive_id

__all__ = ["LinkedHost", "Uplink"]

log = logging.getLogger(__name__)

_COMMANDS: TypeAdapter[Any] = TypeAdapter(LinkCommand)


class LinkedHost(CommandedHost, Protocol):
    """What the link asks of the host it links: what to say, and what to do on a change."""

    def registration(self) -> LinkRegisterReq:
        """What it registers as, now."""
        ...

    async def heartbeat(self) -> LinkHeartbeatReq:
        """What it renews its lease with, now."""
        ...

    def linked(self) -> None:
        """Registered (again): what it was pushed may have been missed while unlinked."""
        ...

    def unlinked(self) -> None:
        """The link ended: whatever it fed stops."""
        ...


class Uplink:
    """The host's link to the coordinator, redialled while the host runs."""

    def __init__(
        self,
        host: LinkedHost,
        paths: HivePaths,
        hive: HiveConfig,
        versions: HostVersions,
        remote: LinkTarget | None = None,
    ) -> None:
        """``remote``: dial the coordinator over the network as that host; else link over
        ``run/hosts.sock``."""
        self.host = host
        self.paths = paths
        self.hive = hive
        self.versions = versions
        self.remote = remote
        self._link: RpcClient | None = None
        self._outage: Outage | None = None  # the local link's (a remote host logs its own)
        self._started = False
        self._tg: TaskGroup | None = None

    @property
    def link(self) -> RpcClient | None:
        """The link while it is up and registered."""
        return self._link

    async def run(self, tg: TaskGroup, task_status: TaskStatus[None]) -> None:
        """Link for ever; its asks answered and its reports sent in ``tg``. Started once
        first linked (a remote host: at once, linked or not)."""
        self._tg = tg
        if self.remote is not None:
            await self._run_remote(task_status)
            return
        first = True
        outage = Outage(log, "coordinator link down", remind=60.0)
        self._outage = outage
        while True:
            try:
                await self._linked(task_status if first else anyio.TASK_STATUS_IGNORED)
            except (Unavailable, OSError) as exc:
                outage.failed(exc)
            first = False
            # Jittered: after a failover every host (and agent) reconnects at once.
            await anyio.sleep(random.uniform(0.3, 0.7))

    async def _run_remote(self, task_status: TaskStatus[None]) -> None:
        """Dial the coordinator for ever: jittered exponential backoff between tries (a
        thousand hosts must not reconnect in lock-step), reset once a link was up."""
        assert self.remote is not None
        # Up at once (signals handled, the console says why it cannot link), linked or not.
        self._started = True
        task_status.started()
        while True:
            async for attempt in stamina.retry_context(
                on=(Unavailable, LinkRefused, OSError),
                attempts=None,
                timeout=None,
                wait_initial=0.5,
                wait_max=30.0,
                wait_jitter=1.0,
            ):
                with attempt:
                    try:
                        await self._linked(anyio.TASK_STATUS_IGNORED)
                    except (Unavailable, LinkRefused, OSError) as exc:
                        # The console (stderr) and the log both carry it, with the reason.
                        log.error("agent host %s: %s; retrying", self.host.host_id, exc)
                        raise
            log.warning("agent host %s: the coordinator link closed; redialling", self.host.host_id)

    async def _linked(self, task_status: TaskStatus[None]) -> None:
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](math.inf)
        if self.remote is not None:
            linking = dial(
                self.remote,
                self.hive.max_frame_bytes,
                on_push=send.send_nowait,
                on_close=send.close,
            )
        else:
            linking = connect(self.paths.hosts_sock, on_push=send.send_nowait, on_close=send.close)
        # Primed off the command loop: an activation then only stats claude's file.
        await self.versions.current()
        async with send, linking as link:
            self._link = link
            registered = await link.call(self.host.registration())
            if self._outage is not None:
                self._outage.ended()
            log.info(
                "agent host %s registered with the coordinator (link epoch %d)",
                self.host.host_id,
                registered.epoch,
            )
            if registered.hive_id is not None:
                # Before any agent starts: its system user is named after the hive's id.
                await anyio.to_thread.run_sync(adopt_hive_id, self.paths, registered.hive_id)
            self.host.linked()
            if not self._started:
                self._started = True
                task_status.started()
            try:
                async with receive, anyio.create_task_group() as beats:
                    if registered.heartbeat_seconds:
                        beats.start_soon(self._heartbeat, link, registered.heartbeat_seconds)
                    async for frame in receive:
                        await self._command(frame)
                    beats.cancel_scope.cancel()
            finally:
                self._link = None
                self.host.unlinked()

    async def _heartbeat(self, link: RpcClient, every: float) -> None:
        """Renew the lease; jittered, so a thousand hosts do not beat in lock-step. A
        heartbeat unanswered for a whole lease means the link is dead though TCP has not
        noticed (a partition): end it, and redial."""
        lease = every * HEARTBEATS_PER_LEASE
        while True:
            await anyio.sleep(every * random.uniform(0.8, 1.0))
            with anyio.move_on_after(lease) as waited:
                try:
                    await link.call(await self.host.heartbeat())
                except HiveError as exc:
                    log.warning("agent host %s: heartbeat not taken: %s", self.host.host_id, exc)
            if waited.cancelled_caught:
                log.error(
                    "agent host %s: no answer to a heartbeat within the lease (%.0fs): the "
                    "link to the coordinator is dead; redialling",
                    self.host.host_id,
                    lease,
                )
                with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                    await link.aclose()  # its reader ends, and with it this link
                return

    async def _command(self, frame: dict[str, Any]) -> None:
        """One push from the coordinator, by its handler in the sealed ``HOST_TABLE``."""
        try:
            cmd = _COMMANDS.validate_python(frame)
        except ValidationError as exc:
            log.error("ignoring a malformed command from the coordinator: %s", exc)
            return
        if isinstance(cmd, Ask):
            # Answered in a task: a follower's long wait holds up no other command.
            if self._link is not None and self._tg is not None:
                self._tg.start_soon(answer, self.host, cmd, self._link)
            return
        await HOST_TABLE(self.host, cmd)

    def tell_soon(self, req: Req[None], about: str) -> None:
        """Send ``req`` in a task, if linked; a failure is logged (the next report corrects
        it)."""
        link, tg = self._link, self._tg
        if link is None or tg is None:
            return

        async def send() -> None:
            try:
                await link.call(req)
            except HiveError as exc:
                log.debug("could not report %s: %s", about, exc)

        tg.start_soon(send)

    async def tell(self, req: Req[None]) -> None:
        """Send ``req`` and wait for the answer, if linked; a failure is ignored."""
        if self._link is None:
            return
        try:
            await self._link.call(req)
        except HiveError:
            pass
