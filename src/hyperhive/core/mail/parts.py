"""The mail layer's services, handed to those above it as one group."""

from __future__ import annotations

from dataclasses import dataclass

from hyperhive.core.mail.broker import Broker
from hyperhive.core.mail.budgets import Budgets
from hyperhive.core.mail.notices import Notices
from hyperhive.core.mail.scheduler import Scheduler
from hyperhive.core.state.loose_ends import LooseEnds

__all__ = ["Mail"]


@dataclass(frozen=True, slots=True)
class Mail:
    """Messages, loose ends, schedules, notices to agents and the budgets that hold turns."""

    broker: Broker
    loose_ends: LooseEnds
    scheduler: Scheduler
    notices: Notices
    budgets: Budgets
