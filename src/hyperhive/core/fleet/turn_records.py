"""Turn records as the coordinator serves them: read over the link of the host that
keeps them (#14: no shared disk), like an agent's log (:mod:`.logs`).

An agent's records are on the host that ran its turns: the one running it,
else the last one that did; when neither is known (the coordinator restarted
since), each connected host is asked. A search across agents fans out to every
connected host and merges the hits, newest first. After a move the records
went with the agent's directory, so its new host has them all.
"""

from __future__ import annotations

from hyperhive.core.fleet.hostlink import HostLink
from hyperhive.core.fleet.logs import ASK_SLACK
from hyperhive.errors import NotFound, Unavailable
from hyperhive.protocol.turns import (
    TurnHit,
    TurnRecord,
    TurnShowAsk,
    TurnsListAsk,
    TurnsSearchAsk,
    TurnSummary,
    agent_of_turn,
)

__all__ = ["TurnRecords"]


class TurnRecords:
    def __init__(self, link: HostLink) -> None:
        self.link = link

    def _hosts_for(self, agent: str) -> list[str]:
        known = self.link.host_of(agent) or self.link.last_host_of(agent)
        if known is not None:
            if not self.link.connected(known):
                raise Unavailable(
                    f"{agent}'s turn records are on agent host {known}, which is not connected "
                    "now; they can be read once that host is back"
                )
            return [known]
        hosts = self.link.connected_hosts()
        if not hosts:
            raise Unavailable(
                f"no agent host is connected, and {agent}'s turn records are kept by the host "
                "that runs it; start one (`hivectl up`, or `hivectl host` on its machine)"
            )
        return hosts

    async def list_turns(self, agent: str, since: float | None, limit: int) -> list[TurnSummary]:
        """``agent``'s turns, newest first."""
        for host in self._hosts_for(agent):
            turns = await self.link.calls.ask(
                host,
                lambda n: TurnsListAsk(
                    cmd="turns_list", ask=n, agent=agent, since=since, limit=limit
                ),
                ASK_SLACK,
                f"a list of {agent}'s turns",
            )
            if turns:
                return turns
        return []

    async def show(self, turn: str, after_seq: int, full: bool) -> TurnRecord:
        """One turn (a page of its steps from ``after_seq``); the id names its agent."""
        agent = agent_of_turn(turn)
        for host in self._hosts_for(agent):
            try:
                return await self.link.calls.ask(
                    host,
                    lambda n: TurnShowAsk(
                        cmd="turn_show", ask=n, agent=agent, turn=turn,
                        after_seq=after_seq, full=full,
                    ),
                    ASK_SLACK,
                    f"turn {turn}",
                )  # fmt: skip
            except NotFound:
                continue
        raise NotFound(f"no turn {turn}: `hivectl turns list {agent}` lists its turns")

    async def search(self, text: str, agent: str | None, limit: int) -> list[TurnHit]:
        """Turns matching ``text`` (of ``agent``, or of every agent), newest first."""
        hosts = self._hosts_for(agent) if agent is not None else self.link.connected_hosts()
        hits: list[TurnHit] = []
        for host in hosts:
            found: list[TurnHit] = await self.link.calls.ask(
                host,
                lambda n: TurnsSearchAsk(
                    cmd="turns_search", ask=n, text=text, agent=agent, limit=limit
                ),
                ASK_SLACK,
                f"a search of turns for {text!r}",
            )
            hits += found
        hits.sort(key=lambda h: h.turn.started, reverse=True)
        return hits[:limit]
