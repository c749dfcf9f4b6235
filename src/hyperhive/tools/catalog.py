"""Every declared tool, checked at import: the one list the rest of the hive reads.

A new tool joins its group's module (``TOOLS``); a new group's module joins
``CATALOG`` here.
"""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel

from hyperhive.tools import (
    approvals,
    bash,
    diagnostics,
    forge,
    inbox,
    lifecycle,
    matrix,
    messaging,
    meta,
    scheduling,
    subagent,
)
from hyperhive.tools.decl import HYPERHIVE_SERVER, Tool

__all__ = ["CATALOG", "CatalogError", "check", "served_by", "wire_requests"]

CATALOG: tuple[Tool[Any, Any], ...] = (
    *messaging.TOOLS,
    *inbox.TOOLS,
    *meta.TOOLS,
    *scheduling.TOOLS,
    *lifecycle.TOOLS,
    *approvals.TOOLS,
    *diagnostics.TOOLS,
    *forge.TOOLS,
    *bash.TOOLS,
    *subagent.TOOLS,
    *subagent.CONTROL_TOOLS,
    *matrix.TOOLS,
)


class CatalogError(TypeError):
    """A declaration that contradicts another or its own request (raised at import)."""


def check(tools: tuple[Tool[Any, Any], ...]) -> None:
    """Refuse a tool declared twice, or one whose request or rendering contradicts it."""
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    for t in tools:
        key = (t.server, t.name)
        if key in seen:
            problems.append(f"{t.server}.{t.name} is declared twice")
        seen.add(key)
        if t.group is not None and t.capability is not None:
            problems.append(f"{t.name}: a group or a capability, not both")
        if t.wire is None:
            if t.render is not None or t.to_wire is not None:
                problems.append(f"{t.name}: render/to_wire without a wire request")
            continue
        if t.server != HYPERHIVE_SERVER:
            problems.append(f"{t.name}: only hyperhive tools forward to the coordinator")
        if t.render is None:
            problems.append(f"{t.name}: a forwarded tool needs a render")
        cmds = typing.get_args(t.wire.model_fields["cmd"].annotation)
        if t.name not in cmds:
            problems.append(f"{t.name}: {t.wire.__name__}.cmd does not admit {t.name!r}")
    if problems:
        raise CatalogError("tool catalog: " + "; ".join(problems))


check(CATALOG)


def served_by(server: str) -> tuple[Tool[Any, Any], ...]:
    """The tools one surface serves, in declaration order."""
    return tuple(t for t in CATALOG if t.server == server)


def wire_requests() -> tuple[type[BaseModel], ...]:
    """The coordinator requests the forwarded tools become (each once)."""
    out: list[type[BaseModel]] = []
    for t in CATALOG:
        if t.wire is not None and t.wire not in out:
            out.append(t.wire)
    return tuple(out)
