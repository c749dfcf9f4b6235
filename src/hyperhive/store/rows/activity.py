"""An event of the hive's activity feed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ActivityRow"]


@dataclass(frozen=True, slots=True)
class ActivityRow:
    """One thing the hive did (a turn, a spawn, a crash…), for the dashboard's feed.

    ``agent`` is the actor; ``others`` are the other agents it concerns (the
    feed's agent filter matches either). ``detail`` is small JSON: cost and
    tokens, an exit code, a reason.
    """

    id: int
    at: float
    kind: str
    agent: str
    others: tuple[str, ...]
    title: str
    detail: Mapping[str, Any] = field(default_factory=dict)
