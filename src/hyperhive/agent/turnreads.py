"""The host's answers to the coordinator's turn-record asks (list, show, search).

Records are on this host's disk (:mod:`.turnstore`), read whether or not the
agent is active here now (a stopped agent's turns stay readable), each read on
a worker thread with a connection of its own. An answer fits in half a frame.
"""

from __future__ import annotations

from pathlib import Path

import anyio

from hyperhive.agent.turnstore import DB_NAME, list_turns, search_turns, show_turn
from hyperhive.config import HivePaths
from hyperhive.errors import NotFound
from hyperhive.protocol.turns import (
    TurnHit,
    TurnRecord,
    TurnShowAsk,
    TurnsListAsk,
    TurnsSearchAsk,
    TurnSummary,
    agent_of_turn,
)

__all__ = ["HostTurnReads", "turns_root"]


def turns_root(paths: HivePaths, agent: str) -> Path:
    """Where a host keeps ``agent``'s turn records (see ``activation.turns_dir``)."""
    return paths.agent_dir(agent) / "turns"


class HostTurnReads:
    def __init__(self, paths: HivePaths, host_id: str, max_frame: int) -> None:
        self.paths = paths
        self.host_id = host_id
        self.budget = max_frame // 2

    async def list_turns(self, ask: TurnsListAsk) -> list[TurnSummary]:
        root = turns_root(self.paths, ask.agent)
        return await anyio.to_thread.run_sync(list_turns, root, ask.since, ask.limit)

    async def show(self, ask: TurnShowAsk) -> TurnRecord:
        if agent_of_turn(ask.turn) != ask.agent:
            raise NotFound(f"turn {ask.turn} is not one of {ask.agent}'s")
        root = turns_root(self.paths, ask.agent)
        record = await anyio.to_thread.run_sync(
            show_turn, root, ask.turn, ask.after_seq, ask.full, self.budget
        )
        if record is None:
            raise NotFound(f"agent host {self.host_id} has no turn {ask.turn}")
        return record

    async def search(self, ask: TurnsSearchAsk) -> list[TurnHit]:
        agents = [ask.agent] if ask.agent is not None else self._recorded_agents()
        hits: list[TurnHit] = []
        for agent in agents:
            root = turns_root(self.paths, agent)
            hits += await anyio.to_thread.run_sync(search_turns, root, ask.text, ask.limit)
        hits.sort(key=lambda h: h.turn.started, reverse=True)
        return _within(hits[: ask.limit], self.budget)

    def _recorded_agents(self) -> list[str]:
        agents = self.paths.home / "agents"
        if not agents.is_dir():
            return []
        return sorted(
            d.name
            for d in agents.iterdir()
            if not d.name.startswith(".") and (d / "turns" / DB_NAME).is_file()
        )


def _within(hits: list[TurnHit], budget: int) -> list[TurnHit]:
    """As many hits as fit an answer (a snippet is short; a summary lists tools)."""
    out: list[TurnHit] = []
    used = 0
    for hit in hits:
        used += len(hit.snippet) + 300 + sum(len(t) for t in hit.turn.tools)
        if out and used > budget:
            break
        out.append(hit)
    return out
