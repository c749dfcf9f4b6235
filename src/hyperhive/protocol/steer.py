"""Steering a running turn: the operator's interrupt, and the host ask that carries it.

``hivectl agents interrupt NAME [--tell TEXT]`` (and the agent page's button)
is ``OpInterruptReq`` on the operator socket; the coordinator asks the host
that runs the agent (``InterruptAsk``, over the host link), whose harness
sends claude the interrupt control request on the running turn's stdin and,
once claude has stopped, the operator's text as a user message in the same
session (:mod:`hyperhive.agent.steering`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hyperhive.protocol.base import Req, RowId, _Out
from hyperhive.protocol.hostreads import AGENT_NAME, Ask

__all__ = ["MAX_TELL", "InterruptAsk", "Interrupted", "OpInterruptReq", "TurnInterrupted"]

MAX_TELL = 64 * 1024
"""The longest ``--tell`` text: a message, not a document (a frame carries it)."""


class TurnInterrupted(_Out):
    """The host's answer: whether a running turn took the interrupt."""

    interrupted: bool  # False: no turn that can be interrupted was running


class InterruptAsk(Ask[TurnInterrupted]):
    """Interrupt ``agent``'s running turn; ``tell`` reaches its model once it has stopped."""

    cmd: Literal["interrupt_turn"]
    agent: AGENT_NAME
    tell: str | None = Field(default=None, max_length=MAX_TELL)


class Interrupted(_Out):
    """``hivectl agents interrupt``'s answer.

    ``told``: where the ``--tell`` text went: ``turn`` (into the interrupted
    turn's session), ``message`` (no turn was running: an operator message,
    ``message_id``, wakes the next), or ``None`` (no text given).
    """

    agent: str
    interrupted: bool
    told: Literal["turn", "message"] | None = None
    message_id: RowId | None = None


class OpInterruptReq(Req[Interrupted]):
    """End ``agent``'s running turn (outcome ``interrupted``, its session kept, its mail
    redelivered); with ``tell``, give its model the operator's text too."""

    cmd: Literal["interrupt"]
    agent: str
    tell: str | None = Field(default=None, min_length=1, max_length=MAX_TELL)
