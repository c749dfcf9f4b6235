"""Log tails the coordinator serves: an agent's log from its host, and the hive's own logs.

An agent's log is on the disk of the host that runs it (#14: no shared
disk), so a tail or a follow step is an ask over that host's link; the
coordinator's own log is its own file. A cursor handed to a follower names
the host it came from, so the next step goes back there.
"""

from __future__ import annotations

from pathlib import Path

import anyio

from hyperhive.config import HivePaths
from hyperhive.core.fleet.hostlink import HostLink
from hyperhive.errors import Unavailable
from hyperhive.protocol import HostJournal, LogTail
from hyperhive.protocol.hostreads import HostJournalAsk, HostTail, LogTailAsk

__all__ = ["ASK_SLACK", "LogTails", "tail_lines"]

# How much longer than a follower's wait the coordinator gives a host to answer.
ASK_SLACK = 15.0


def tail_lines(path: Path, lines: int) -> list[str]:
    """The last ``lines`` lines of a file, read from the end (logs can be large)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            block = min(size, max(4096, lines * 200))
            fh.seek(size - block)
            data = fh.read()
    except FileNotFoundError:
        return []
    text = data.decode("utf-8", "replace").splitlines()
    return text[-lines:]


class LogTails:
    def __init__(self, paths: HivePaths, link: HostLink) -> None:
        self.paths = paths
        self.link = link

    def _host_for(self, agent: str, cursor_host: str | None) -> str | None:
        """The host that has ``agent``'s log: the one running it, else the last one that
        did, else the one the follower's cursor came from."""
        return self.link.host_of(agent) or self.link.last_host_of(agent) or cursor_host

    async def agent(
        self, agent: str, lines: int, after: str | None = None, wait: float = 0.0
    ) -> LogTail:
        """The last ``lines`` of ``agent``'s log; or, with a cursor, what was written after
        it (waiting up to ``wait`` seconds for a line)."""
        cursor_host, _, host_cursor = (after or "").partition("@")
        host = self._host_for(agent, cursor_host or None)
        if after is not None and host != cursor_host:
            host_cursor = "0:0"  # the agent moved: its new host's log, from the start
        if host is None:
            return await self._search(agent, lines)
        if not self.link.connected(host):
            raise Unavailable(
                f"{agent}'s log is on agent host {host}, which is not connected now; "
                "it can be read once that host is back"
            )
        tail = await self._ask(host, agent, lines, host_cursor if after else None, wait)
        return LogTail(agent=agent, lines=tail.lines, cursor=f"{host}@{tail.cursor}", host=host)

    async def _ask(
        self, host: str, agent: str, lines: int, after: str | None, wait: float
    ) -> HostTail:
        return await self.link.calls.ask(
            host,
            lambda n: LogTailAsk(
                cmd="log_tail", ask=n, agent=agent, lines=lines, after=after, wait=wait
            ),
            wait + ASK_SLACK,
            f"a tail of {agent}'s log",
        )

    async def _search(self, agent: str, lines: int) -> LogTail:
        """No host is known to have run ``agent`` (the coordinator restarted since): ask
        each connected host whether it has its log."""
        hosts = self.link.connected_hosts()
        if not hosts:
            raise Unavailable(
                f"no agent host is connected, and {agent}'s log is kept by the host that runs "
                "it; start one (`hivectl up`, or `hivectl host` on its machine)"
            )
        for host in hosts:
            tail = await self._ask(host, agent, lines, None, 0.0)
            if tail.found:
                return LogTail(
                    agent=agent, lines=tail.lines, cursor=f"{host}@{tail.cursor}", host=host
                )
        return LogTail(agent=agent, lines=[], cursor=None, host=None)

    async def host_journal(self, asker: str, lines: int) -> HostJournal:
        """The coordinator's own log, and the log of the host running ``asker``."""
        coordinator = await anyio.to_thread.run_sync(
            tail_lines, self.paths.logs / "coordinator.log", lines
        )
        host = self.link.host_of(asker)
        if host is None or not self.link.connected(host):
            return HostJournal(coordinator=coordinator, host=[])
        journal = await self.link.calls.ask(
            host,
            lambda n: HostJournalAsk(cmd="host_journal", ask=n, lines=lines),
            ASK_SLACK,
            "its journal",
        )
        return HostJournal(coordinator=coordinator, host=journal)
