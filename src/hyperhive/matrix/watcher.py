"""Matrix activity wakes the agent: one ``/sync`` loop per active Matrix-enabled agent.

It runs on the agent's host with the agent's own account. Each sync answer
is judged by :mod:`.rules`: direct messages, mentions and messages in the
agent's wake-on-every-message rooms become one wake on the agent's socket
(a message from ``matrix``, the same path as any in-sandbox producer);
invitations from the operator or an allowed inviter are accepted, others
left pending for the operator to see.

Each message is one wake keyed by its event ID, and the sync token is
written to the agent's state atomically once the batch's wakes are
accepted: a restarted host resumes where the last delivered batch ended, so
it neither misses what came after nor wakes again for what was delivered —
a host that died between the wakes and the token write sends them again,
and the coordinator lands each key once. The first sync of an account that has no token
yet wakes for nothing: the past is not news.

The homeserver down: each failed sync is logged plainly and retried with
jittered backoff up to ``[matrix] backoff_max``; the first sync that works
again says so.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from hyperhive.backoff import until_it_works
from hyperhive.errors import HiveError
from hyperhive.matrix.agent import AgentMatrix, nio_call
from hyperhive.matrix.errors import MatrixTokenRejected
from hyperhive.matrix.identity import PendingInvite
from hyperhive.matrix.rules import Incoming, Reason, accept_invite, render_wake, wake_reason

__all__ = ["MatrixWatcher"]

log = logging.getLogger(__name__)

# (body, key): the key (the event ID) makes a repeated delivery land once at the coordinator.
Deliver = Callable[[str, str], Awaitable[None]]


class MatrixWatcher:
    def __init__(
        self, matrix: AgentMatrix, deliver: Deliver, *, timeout: float, backoff_max: float
    ) -> None:
        self.matrix = matrix
        self.deliver = deliver
        self.timeout_ms = int(timeout * 1000)
        self.backoff_max = backoff_max
        self.wake_rooms: set[str] = set()
        self._started = False
        self.syncs = 0  # successful syncs, for the operator's view and tests

    async def _resolve_wake_rooms(self, client: Any) -> None:
        m = self.matrix
        for room in m.config.wake_rooms:
            if room.startswith("#"):
                try:
                    resp = await nio_call(
                        m.homeserver, f"resolving {room}", client.room_resolve_alias(room)
                    )
                except HiveError as exc:
                    log.warning("%s: matrix: wake room %s: %s", m.agent, room, exc.message)
                    continue
                self.wake_rooms.add(str(resp.room_id))
            else:
                self.wake_rooms.add(room)

    async def sync_once(self) -> int:
        """One ``/sync``: accept invitations, wake for what warrants it; how many woke it."""
        from nio import InviteMemberEvent, RoomMemberEvent, RoomMessageText

        m = self.matrix
        client = await m.client()
        first = not self._started
        if first:
            await self._resolve_wake_rooms(client)
        since = m.sync_state().since
        try:
            resp = await nio_call(
                m.homeserver,
                "syncing",
                # The first sync of this run brings every joined room's state (names,
                # members, unread counts) for the tools; later ones only what changed.
                client.sync(
                    timeout=0 if first else self.timeout_ms, since=since, full_state=first or None
                ),
            )
        except MatrixTokenRejected:
            await m.reissue(client)
            raise
        me = m.user_id
        operator = m.operator
        invited: list[PendingInvite] = []
        settled: set[str] = set(resp.rooms.leave)
        for room_id, info in resp.rooms.invite.items():
            inviter = next(
                (
                    e.sender
                    for e in info.invite_state
                    if isinstance(e, InviteMemberEvent | RoomMemberEvent)
                    and e.state_key == me
                    and e.membership == "invite"
                ),
                None,
            )
            if inviter is None:
                continue
            if accept_invite(inviter, operator, m.config.allowed_inviters):
                await nio_call(m.homeserver, f"joining {room_id}", client.join(room_id))
                settled.add(room_id)
                log.info("%s: matrix: accepted %s's invitation to %s", m.agent, inviter, room_id)
            else:
                room = client.rooms.get(room_id)
                name = room.display_name if room is not None else ""
                invited.append(PendingInvite(room_id, inviter, name))
                log.info(
                    "%s: matrix: invitation to %s from %s left pending (not an allowed inviter)",
                    m.agent,
                    room_id,
                    inviter,
                )
        items: list[tuple[Reason, Incoming]] = []
        if since is not None:  # no token yet: history, not news
            for room_id, info in resp.rooms.join.items():
                settled.add(room_id)
                room = client.rooms.get(room_id)
                for event in info.timeline.events:
                    if not isinstance(event, RoomMessageText):
                        continue
                    content = event.source.get("content", {})
                    mentions = content.get("m.mentions", {}) if isinstance(content, dict) else {}
                    msg = Incoming(
                        room_id=room_id,
                        room_name=room.display_name if room is not None else room_id,
                        sender=event.sender,
                        body=event.body,
                        is_direct=room is not None and room.member_count <= 2,
                        mentions=tuple(
                            mentions.get("user_ids", []) if isinstance(mentions, dict) else []
                        ),
                        formatted=event.formatted_body or "",
                        since=info.timeline.prev_batch,
                        event_id=event.event_id,
                    )
                    reason = wake_reason(msg, me, self.wake_rooms)
                    if reason is not None:
                        items.append((reason, msg))
        for item in items:
            await self.deliver(render_wake([item]), item[1].event_id)
        await m.save_sync_state(resp.next_batch, tuple(invited), settled)
        self._started = True
        self.syncs += 1
        return len(items)

    async def run(self) -> None:
        """Sync forever; failures back off with jitter (up to ``backoff_max``), logged."""
        m = self.matrix

        def failed(exc: HiveError) -> None:
            m.problem = exc.message
            log.warning("%s: matrix sync failed (retrying with backoff): %s", m.agent, exc.message)

        while True:
            await until_it_works(self.sync_once, backoff_max=self.backoff_max, on_failure=failed)
            if m.problem is not None:
                m.problem = None
                log.info("%s: matrix sync works again", m.agent)
