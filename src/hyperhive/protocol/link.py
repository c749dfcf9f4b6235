"""The agent-host link: host → coordinator requests, coordinator → host commands."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
)

from hyperhive.config import AgentConfig
from hyperhive.protocol.base import _Req

# ---- agent-host link ------------------------------------------------------


class LinkRegisterReq(_Req):
    cmd: Literal["register"]
    host_id: str = Field(min_length=1, max_length=64)
    pid: int | None = None
    claude_slots: int | None = Field(default=None, ge=1)  # how many claudes it runs at once


class LinkAgentStateReq(_Req):
    """The host reports an agent's turn state (Idle/WaitingSlot/Thinking/Compacting).

    ``waiting_slot``: woken, queued for one of the host's claude slots since ``since``.
    """

    cmd: Literal["agent_state"]
    agent: str
    turn_state: Literal["idle", "waiting_slot", "thinking", "compacting", "stopped"]
    since: float
    needs_login: bool = False


class LinkAgentCrashedReq(_Req):
    cmd: Literal["agent_crashed"]
    agent: str
    reason: str


class LinkGoodbyeReq(_Req):
    """The host is stopping on purpose: its agents stopping is not a crash."""

    cmd: Literal["goodbye"]


LinkRequest = Annotated[
    LinkRegisterReq | LinkAgentStateReq | LinkAgentCrashedReq | LinkGoodbyeReq,
    Field(discriminator="cmd"),
]


class ActivateCmd(_Req):
    cmd: Literal["activate"]
    agent: str
    config: AgentConfig
    parent: str | None = None
    descendants: list[str] = Field(default_factory=list)
    incarnation: int = 0


class DeactivateCmd(_Req):
    cmd: Literal["deactivate"]
    agent: str
    graceful: bool = True


LinkCommand = Annotated[ActivateCmd | DeactivateCmd, Field(discriminator="cmd")]
