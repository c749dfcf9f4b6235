"""What commands print under ``--json`` when it is not a wire model as it came.

Each is documented in ``docs/cli-json.md``, with the wire models the other
commands print as they are; keys listed there are never renamed or removed.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from hyperhive.protocol import (
    AgentConfigView,
    AgentView,
    ApprovalOutcome,
    ForgeView,
    MatrixAccountView,
    Message,
)

__all__ = [
    "AgentDetail",
    "ClaudeInstalled",
    "DashboardLink",
    "LoggedInTo",
    "PermsProposed",
    "SendResult",
    "SpawnOutcome",
    "Stopped",
    "ToolArgs",
]


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class AgentDetail(AgentView):
    """``agents show``: the agents-list row plus its config, forge and Matrix."""

    config: AgentConfigView | None  # None: its config is broken (see ``broken``)
    forge: ForgeView
    matrix: MatrixAccountView | None  # None: not running, or no Matrix account


class SpawnOutcome(_Shape):
    name: str
    parent: str | None
    host: str | None  # the agent host it was pinned to (None: placed automatically)
    placed: bool  # an agent host took it at once (else it starts when one connects)
    running: bool  # its host answered for it within --timeout


class SendResult(_Shape):
    id: int
    to: str
    reply: Message | None  # the reply, with --wait (else null)


class PermsProposed(_Shape):
    approval_id: int
    commit: str | None
    approved: ApprovalOutcome | None  # with --apply


class ToolArgs(_Shape):
    tool_groups: list[str]
    capabilities: list[str]
    tools_arg: str
    allowed_tools_arg: str


class DashboardLink(_Shape):
    url: str
    login_url: str | None
    requested_port: int
    busy: str | None


class LoggedInTo(_Shape):
    kind: str
    path: str


class Stopped(_Shape):
    home: str
    pid: int
    forced: bool  # --now: agents' claude processes were killed, not let finish


class ClaudeInstalled(_Shape):
    version: str
    path: str
    overridden_by: str | None  # hive.toml's claude_bin, which wins over this one
