"""Every declared tool, collected from the declaration modules and checked at import.

The one list the rest of the hive reads. A module of :mod:`hyperhive.tools`
declares its tools in ``TOOLS`` (a second server's in ``<NAME>_TOOLS``, named in
its ``__all__``, as :mod:`~hyperhive.tools.subagent` does for
``subagent_control``). The catalog finds every such module by itself: a new
tool, or a new group's module, is registered by being written. Modules named
for a tool group come in :class:`ToolGroup` order, then the others by name; each
one's tools in declaration order.
"""

from __future__ import annotations

import importlib
import pkgutil
import typing
from collections.abc import Mapping
from types import MappingProxyType, ModuleType
from typing import Any

from pydantic import BaseModel

import hyperhive.tools
from hyperhive.tools.decl import HYPERHIVE_SERVER, Tool
from hyperhive.tools.groups import ToolGroup

__all__ = [
    "BY_MODULE",
    "CATALOG",
    "CatalogError",
    "check",
    "declared_in",
    "served_by",
    "wire_requests",
]

# The package's machinery, not declarations (``doc`` itself reads the catalog).
_MACHINERY = frozenset({"catalog", "decl", "doc", "groups"})


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


def declared_in(module: ModuleType) -> tuple[Tool[Any, Any], ...]:
    """``module``'s ``TOOLS``, then its other exported ``*_TOOLS`` tuples (by name)."""
    exported: tuple[str, ...] = tuple(getattr(module, "__all__", ()))
    names = sorted(
        (n for n in exported if n == "TOOLS" or n.endswith("_TOOLS")),
        key=lambda n: (n != "TOOLS", n),
    )
    if not names:
        raise CatalogError(
            f"{module.__name__} exports no TOOLS: a module of hyperhive.tools declares "
            "tools (machinery belongs in catalog._MACHINERY)"
        )
    tools: list[Tool[Any, Any]] = []
    for name in names:
        value = getattr(module, name)
        if not isinstance(value, tuple) or not all(isinstance(t, Tool) for t in value):
            raise CatalogError(f"{module.__name__}.{name} is not a tuple of Tool declarations")
        tools.extend(value)
    return tuple(tools)


def _collect() -> Mapping[str, tuple[Tool[Any, Any], ...]]:
    groups = [g.value for g in ToolGroup]
    found = sorted(
        (
            m.name
            for m in pkgutil.iter_modules(hyperhive.tools.__path__)
            if m.name not in _MACHINERY and not m.name.startswith("_")
        ),
        key=lambda n: (groups.index(n), "") if n in groups else (len(groups), n),
    )
    return MappingProxyType(
        {name: declared_in(importlib.import_module(f"hyperhive.tools.{name}")) for name in found}
    )


#: Each declaration module's tools, by the module's name (``meta``, ``bash``…).
BY_MODULE: Mapping[str, tuple[Tool[Any, Any], ...]] = _collect()

CATALOG: tuple[Tool[Any, Any], ...] = tuple(t for tools in BY_MODULE.values() for t in tools)

check(CATALOG)


def served_by(server: str) -> tuple[Tool[Any, Any], ...]:
    """The tools one surface serves, in catalog order."""
    return tuple(t for t in CATALOG if t.server == server)


def wire_requests() -> tuple[type[BaseModel], ...]:
    """The coordinator requests the forwarded tools become (each once)."""
    out: list[type[BaseModel]] = []
    for t in CATALOG:
        if t.wire is not None and t.wire not in out:
            out.append(t.wire)
    return tuple(out)
