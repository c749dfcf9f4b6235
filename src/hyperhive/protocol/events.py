"""Helper events: lifecycle notices delivered to the submitting agent."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
)

from hyperhive.protocol.base import _Out

# ---- helper events --------------------------------------------------------


class _Event(_Out):
    agent: str


class ContainerCrash(_Event):
    event: Literal["container_crash"] = "container_crash"
    reason: str = ""


class NeedsUpdate(_Event):
    event: Literal["needs_update"] = "needs_update"


class ApprovalResolved(_Event):
    event: Literal["approval_resolved"] = "approval_resolved"
    approval_id: int
    approved: bool
    reason: str = ""


class Spawned(_Event):
    event: Literal["spawned"] = "spawned"


class Rebuilt(_Event):
    event: Literal["rebuilt"] = "rebuilt"


class Killed(_Event):
    event: Literal["killed"] = "killed"


class Destroyed(_Event):
    event: Literal["destroyed"] = "destroyed"


class NeedsLogin(_Event):
    event: Literal["needs_login"] = "needs_login"


class LoggedIn(_Event):
    event: Literal["logged_in"] = "logged_in"


class ConfigReady(_Event):
    event: Literal["config_ready"] = "config_ready"


HelperEvent = Annotated[
    ContainerCrash
    | NeedsUpdate
    | ApprovalResolved
    | Spawned
    | Rebuilt
    | Killed
    | Destroyed
    | NeedsLogin
    | LoggedIn
    | ConfigReady,
    Field(discriminator="event"),
]

# Inbox-worthy events go to the submitter's inbox; the rest become todos.
INBOX_EVENTS = frozenset({"container_crash", "needs_update", "approval_resolved"})
