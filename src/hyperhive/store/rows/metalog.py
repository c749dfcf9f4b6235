"""An entry of the meta log."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["DeployEntry"]


@dataclass(frozen=True, slots=True)
class DeployEntry:
    """One entry of the meta log: an applied config, a removal, or a note.

    ``config`` is the full TOML text applied (``None`` for a removal or a
    note); ``topology`` is the whole tree after the entry, when it changed it.
    """

    seq: int
    at: float
    action: str
    agent: str | None
    message: str
    config: str | None = None
    topology: Mapping[str, str | None] | None = None
