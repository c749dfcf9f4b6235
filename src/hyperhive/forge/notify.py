"""Forge notifications wake the agent: poll, deliver as a message from ``forge``, mark read.

One poller per active forge-enabled agent, on its host, with its own token
(so it sees exactly that user's notifications). Each unread thread becomes a
``wake`` on the agent's socket — a message from ``forge`` with the link — and
is marked read once delivered.

Exactly once: a notification is keyed by thread id and update time (a new
comment on a thread updates it and wakes again). The wake carries that key,
and the coordinator stores a message once per key, so a host that died after
the wake was accepted but before it noted it sends it again harmlessly. The
key is also written to the agent's state atomically right after the wake and
before the thread is marked read, so a restarted host finds it and only marks
the thread read: the ledger, not the forge's read flag, decides what was
delivered.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from hyperhive.backoff import until_it_works
from hyperhive.errors import HiveError, StorageError
from hyperhive.forge.agent import AgentForge
from hyperhive.forge.errors import ForgeTokenRejected
from hyperhive.safefs import atomic_write_beneath, open_beneath

if TYPE_CHECKING:
    from pyforgejo.types.notification_thread import NotificationThread

__all__ = ["LEDGER_FILE", "NotificationPoller", "notification_key", "render_notification"]

log = logging.getLogger(__name__)

LEDGER_FILE = "forge-notified.json"
LEDGER_KEEP = 2000

# (body, key): the key makes a repeated delivery land once at the coordinator.
Deliver = Callable[[str, str], Awaitable[None]]


def notification_key(thread: NotificationThread) -> str:
    updated = thread.updated_at.isoformat() if thread.updated_at else "-"
    return f"{thread.id}@{updated}"


def render_notification(thread: NotificationThread) -> str:
    """The message the agent reads: what, where, and the link to open."""
    subject = thread.subject
    repo = thread.repository.full_name if thread.repository else "?"
    kind = (subject.type if subject and subject.type else "notification").lower()
    title = subject.title if subject and subject.title else "(untitled)"
    state = f" ({subject.state})" if subject and subject.state else ""
    link = (subject.latest_comment_html_url or subject.html_url) if subject else None
    return f"forge: {kind} in {repo}{state}: {title}\n{link or thread.url or ''}".rstrip()


class _Ledger:
    """Keys already delivered, kept in the agent's state (atomic, no links followed)."""

    def __init__(self, state_dir: Path) -> None:
        self.root = state_dir
        self.path = state_dir / LEDGER_FILE
        self.keys: list[str] = self._load()

    def _load(self) -> list[str]:
        try:
            fd = open_beneath(self.root, self.path, 0, make_dirs=False)
        except StorageError:
            return []
        with open(fd, "rb") as fh:
            raw = fh.read()
        try:
            data = json.loads(raw)
        except ValueError:
            log.warning("%s is not JSON; starting a fresh ledger", self.path)
            return []
        keys = data.get("delivered") if isinstance(data, dict) else None
        return [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []

    def __contains__(self, key: str) -> bool:
        return key in self.keys

    def add(self, key: str) -> None:
        self.keys = [*self.keys, key][-LEDGER_KEEP:]
        data = json.dumps({"delivered": self.keys}).encode()
        atomic_write_beneath(self.root, self.path, data, 0o600)


class NotificationPoller:
    def __init__(
        self,
        forge: AgentForge,
        deliver: Deliver,
        *,
        interval: float,
        backoff_max: float,
    ) -> None:
        self.forge = forge
        self.deliver = deliver
        self.interval = interval
        self.backoff_max = backoff_max
        self.ledger = _Ledger(forge.state_dir)

    async def poll_once(self) -> int:
        """Deliver every unread notification not delivered yet; how many were."""
        token = await self.forge.token()
        delivered = 0
        async with self.forge.as_agent(token) as api:
            try:
                async with api.guard("listing notifications"):
                    threads = await api.notifications.notify_get_list(
                        status_types=["unread"], limit=50
                    )
            except ForgeTokenRejected:
                await self.forge.reissue(token)  # the retry polls with the new one
                raise
            threads.sort(key=lambda t: (t.updated_at is None, t.updated_at, t.id or 0))
            for thread in threads:
                if thread.id is None:
                    continue
                key = notification_key(thread)
                if key not in self.ledger:
                    await self.deliver(render_notification(thread), key)
                    self.ledger.add(key)
                    delivered += 1
                async with api.guard(f"marking notification {thread.id} read"):
                    await api.notifications.notify_read_thread(thread.id, to_status="read")
        return delivered

    async def run(self) -> None:
        """Poll forever; failures back off with jitter (up to ``backoff_max``)."""

        def failed(exc: HiveError) -> None:
            log.warning("%s: forge notifications: %s", self.forge.agent, exc.message)

        while True:
            await until_it_works(self.poll_once, backoff_max=self.backoff_max, on_failure=failed)
            await anyio.sleep(self.interval * random.uniform(0.8, 1.2))
