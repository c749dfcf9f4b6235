"""The ops layer's services, handed to the APIs as one group."""

from __future__ import annotations

from dataclasses import dataclass

from hyperhive.core.ops.approvals import Approvals
from hyperhive.core.ops.lifecycle import Lifecycle

__all__ = ["Ops"]


@dataclass(frozen=True, slots=True)
class Ops:
    """What changes an agent: its lifecycle, and the approvals that gate it."""

    lifecycle: Lifecycle
    approvals: Approvals
