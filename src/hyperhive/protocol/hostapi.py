"""The agent host's HTTP API as the dashboard reads it (operator token only)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AgentWork", "HostWork"]


class AgentWork(BaseModel):
    """What runs for one agent beside its turns, right now."""

    model_config = ConfigDict(extra="forbid")
    bash_tasks_running: int = Field(ge=0)
    subagents_running: int = Field(ge=0)


class HostWork(BaseModel):
    """``GET /api/host/work``: every active agent of the host, by name."""

    model_config = ConfigDict(extra="forbid")
    agents: dict[str, AgentWork]
