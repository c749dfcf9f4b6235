"""Which agent host an agent belongs on."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Assignment"]


@dataclass(frozen=True, slots=True)
class Assignment:
    """Which agent host ``agent`` belongs on, pinned there by the operator or not, and
    an ``agents move`` in progress (``move_phase``: draining, copying, cleanup)."""

    agent: str
    host: str
    pinned: bool
    assigned_at: float
    move_id: str | None = None
    move_from: str | None = None
    move_to: str | None = None
    move_phase: str | None = None
