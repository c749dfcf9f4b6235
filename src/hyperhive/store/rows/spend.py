"""What claude runs cost: one run's entry, a run as reported, totals and series."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hyperhive.runcost import Figures, summed

__all__ = ["SpendEntry", "SpendPoint", "SpendRun", "SpendTotal"]


@dataclass(frozen=True, slots=True)
class SpendEntry:
    """What one claude run cost, counted to ``agent`` (a subagent's run to its parent).

    ``key`` names the run and is unique per agent: recording it twice (a
    resent ``turn_end``) counts it once. The figures are the run's own
    (:mod:`hyperhive.runcost`); ``session_usd`` is what claude said the
    session had cost after the run (``None``: it said nothing, or the row is
    older than the session being kept).
    """

    agent: str
    key: str
    kind: str  # "turn", "compaction" or "subagent"
    at: float
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    session_id: str | None = None
    session_usd: float | None = None

    def figures(self) -> Figures:
        """The run's own USD and tokens."""
        return Figures(
            self.cost_usd,
            self.input_tokens,
            self.output_tokens,
            self.cache_read_tokens,
            self.cache_creation_tokens,
        )

    @property
    def tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_creation_tokens
        )


@dataclass(frozen=True, slots=True)
class SpendRun:
    """One claude run as reported: its session's totals per model after it (none: no result).

    What :meth:`~hyperhive.store.base.SpendRepo.record` turns into a
    :class:`SpendEntry` of the run's own figures.
    """

    agent: str
    key: str
    kind: str
    at: float
    session_id: str | None = None
    session_totals: Mapping[str, Figures] = field(default_factory=dict)

    def entry(self, own: Figures) -> SpendEntry:
        return SpendEntry(
            self.agent,
            self.key,
            self.kind,
            self.at,
            own.usd,
            own.input_tokens,
            own.output_tokens,
            own.cache_read_tokens,
            own.cache_creation_tokens,
            self.session_id,
            summed(self.session_totals.values()).usd if self.session_totals else None,
        )


@dataclass(frozen=True, slots=True)
class SpendTotal:
    """One agent's spend over a period: USD, tokens (all four kinds) and runs."""

    agent: str
    usd: float = 0.0
    tokens: int = 0
    runs: int = 0


@dataclass(frozen=True, slots=True)
class SpendPoint:
    """One agent's spend in the bucket starting at ``start``."""

    agent: str
    start: float
    usd: float
    tokens: int
