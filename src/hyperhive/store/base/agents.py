"""``agent_state``: each agent's status, last turn, compact flag and desired state."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from hyperhive.store.rows import AgentState, CompactRequest, TurnRecord

__all__ = ["AgentRepo"]


class AgentRepo(ABC):
    """``agent_state``: one row per agent, created on first touch with defaults."""

    @abstractmethod
    async def ensure(self, names: Sequence[str]) -> None: ...

    @abstractmethod
    async def get(self, name: str) -> AgentState:
        """The row (created with defaults if absent)."""

    @abstractmethod
    async def all(self) -> list[AgentState]:
        """Every row, by name."""

    @abstractmethod
    async def set_status(self, name: str, text: str, at: float | None) -> None:
        """Set the status line; ``at`` is ``None`` when cleared."""

    @abstractmethod
    async def record_turn(
        self,
        name: str,
        outcome: str,
        context_usage: float | None,
        session_id: str | None,
        *,
        ack: Sequence[int] = (),
    ) -> TurnRecord:
        """A turn ended: ack its handled messages, store its outcome, clear compact.

        ``needs_login`` becomes ``outcome == "needs_login"``; ``None`` usage or
        session keep the previous value. Returns the state before the change.
        """

    @abstractmethod
    async def request_compact(self, name: str, above: float | None) -> CompactRequest:
        """Flag a compact if the last usage is known and > ``above`` (``None``: always,
        the operator's ungated compact); wakes if queued."""

    @abstractmethod
    async def record_started(self, name: str, hive: str, claude: str | None) -> str | None:
        """The agent started running these versions: record them and clear
        ``needs_update``; return what ``needs_update`` said before (``None``: nothing)."""

    @abstractmethod
    async def mark_needs_update(self, name: str, behind: str) -> bool:
        """Set ``needs_update`` to ``behind`` unless it is set already; True if it was not."""

    @abstractmethod
    async def set_desired(self, name: str, running: bool) -> None: ...

    @abstractmethod
    async def desired_running(self) -> frozenset[str]: ...

    @abstractmethod
    async def delete(self, name: str) -> bool:
        """Forget the agent's state row (its mail and loose ends stay)."""
