"""The agent tree: pure rules over ``name -> parent | None``, and its store.

The rules (``apply_set_parent``, ``reconcile``, ``may_route``, ``may_manage``)
do no I/O and never mutate their input; ``TopologyStore`` keeps the tree in
the hive's store (``TopologyRepo``), calls them, and writes one logged entry
per change. Every walk is guarded by a visited set and a hop cap, so an
adopted file with a cycle can never hang a caller.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from hyperhive.errors import (
    CycleRefused,
    RouteRefused,
    SelfParent,
    UnknownChild,
    UnknownParent,
)
from hyperhive.names import OPERATOR
from hyperhive.store.base import TopologyRepo
from hyperhive.store.rows import DeployEntry

__all__ = [
    "MAX_DEPTH",
    "RouteDecision",
    "Topology",
    "TopologyStore",
    "ancestors",
    "apply_set_parent",
    "check_room_below",
    "check_route",
    "children",
    "descendants",
    "height",
    "is_descendant_of",
    "may_destroy",
    "may_manage",
    "may_route",
    "parent_of",
    "places_changed",
    "read_topology_file",
    "reconcile",
    "refuse_route",
    "roots",
]

log = logging.getLogger(__name__)

Topology = Mapping[str, str | None]

# Same bound as the spec's ancestor walk: deep enough for any real tree,
# small enough that a corrupt file costs nothing.
MAX_DEPTH = 32


def parent_of(topology: Topology, name: str) -> str | None:
    """The parent of ``name``; unknown names are roots."""
    return topology.get(name)


def ancestors(topology: Topology, name: str) -> list[str]:
    """Parent, grandparent, … (nearest first); stops at a cycle or MAX_DEPTH."""
    out: list[str] = []
    seen = {name}
    current = topology.get(name)
    while current is not None and current not in seen and len(out) < MAX_DEPTH:
        out.append(current)
        seen.add(current)
        current = topology.get(current)
    return out


def is_descendant_of(topology: Topology, name: str, ancestor: str) -> bool:
    """True if ``ancestor`` is a strict ancestor of ``name``."""
    return ancestor in ancestors(topology, name)


def children(topology: Topology, name: str) -> list[str]:
    """Direct children of ``name``, sorted."""
    return sorted(child for child, parent in topology.items() if parent == name)


def descendants(topology: Topology, name: str) -> list[str]:
    """Every agent below ``name`` (breadth-first), cycle-safe."""
    index: dict[str, list[str]] = {}
    for child, parent in topology.items():
        if parent is not None:
            index.setdefault(parent, []).append(child)
    out: list[str] = []
    seen = {name}
    frontier = [name]
    while frontier:
        nxt: list[str] = []
        for node in frontier:
            for child in sorted(index.get(node, ())):
                if child not in seen:
                    seen.add(child)
                    out.append(child)
                    nxt.append(child)
        frontier = nxt
    return out


def places_changed(
    before: Topology, after: Topology
) -> dict[str, tuple[str | None, tuple[str, ...]]]:
    """Agents whose parent or descendants differ between two trees, with their new ones.

    A reparent changes the moved agent's parent and the descendants of its
    old and new ancestors; everyone listed must hear of it.
    """
    out: dict[str, tuple[str | None, tuple[str, ...]]] = {}
    for name in after:
        place = (after.get(name), tuple(descendants(after, name)))
        if (before.get(name), tuple(descendants(before, name))) != place:
            out[name] = place
    return out


def roots(topology: Topology) -> list[str]:
    """Agents with no parent (or whose parent is unknown), sorted."""
    return sorted(n for n, p in topology.items() if p is None or p not in topology)


def height(topology: Topology, name: str) -> int:
    """How many levels hang below ``name`` (0 for a leaf), cycle-safe."""
    index: dict[str, list[str]] = {}
    for child, parent in topology.items():
        if parent is not None:
            index.setdefault(parent, []).append(child)
    seen = {name}
    frontier = [name]
    levels = 0
    while True:
        nxt = [c for node in frontier for c in index.get(node, ()) if c not in seen]
        if not nxt:
            return levels
        seen.update(nxt)
        frontier = nxt
        levels += 1


def check_room_below(topology: Topology, parent: str, subtree_height: int = 0) -> None:
    """Refuse a new child under ``parent`` past :data:`MAX_DEPTH` (a reparent or an init).

    ``subtree_height`` is how deep the arriving child's own subtree is: a moved
    agent brings its descendants, and the deepest of them must fit too.
    """
    if len(ancestors(topology, parent)) + subtree_height >= MAX_DEPTH:
        raise CycleRefused(
            f"no room below {parent!r}: the tree would be more than {MAX_DEPTH} levels deep "
            "(or it sits on a cycle in topology.json)"
        )


def apply_set_parent(
    topology: Topology, child: str, new_parent: str | None, known: Iterable[str]
) -> tuple[dict[str, str | None], bool]:
    """Reparent ``child`` under ``new_parent`` (None = promote to root).

    Returns ``(new_topology, changed)``; setting the parent it already has is
    a no-op. Refuses an unknown child or parent (a typo guard), a parent of
    itself, and a move under one of its own descendants.
    """
    known_set = set(known)
    if child not in known_set:
        raise UnknownChild(f"unknown agent {child!r}: nothing to reparent (check the name)")
    if new_parent is not None:
        if new_parent not in known_set:
            raise UnknownParent(
                f"unknown parent {new_parent!r}: no such agent (check the name, "
                "or promote to root with no parent)"
            )
        if new_parent == child:
            raise SelfParent(f"{child!r} cannot be its own parent")
        if child in ancestors(topology, new_parent):
            raise CycleRefused(
                f"moving {child!r} under {new_parent!r} would make a cycle: "
                f"{new_parent!r} is {child!r}'s descendant; move {new_parent!r} first"
            )
        check_room_below(topology, new_parent, height(topology, child))
    if topology.get(child) == new_parent and child in topology:
        return dict(topology), False
    updated = dict(topology)
    updated[child] = new_parent
    return updated, True


def reconcile(
    topology: Topology, agents: Iterable[str], pending_init: Iterable[str] = ()
) -> dict[str, str | None]:
    """Bring the tree in line with the agents that exist.

    New agents become roots; entries of agents that are gone are dropped
    unless they are pending their first apply; everything else is kept as it
    is, so operator reparents survive.
    """
    keep = set(agents) | set(pending_init)
    out = {name: parent for name, parent in topology.items() if name in keep}
    for name in sorted(set(agents)):
        out.setdefault(name, None)
    return out


def may_manage(topology: Topology, actor: str, target: str) -> bool:
    """Kill/start/restart/update/get_logs/config change: strict ancestors only."""
    return actor != target and is_descendant_of(topology, target, actor)


def may_destroy(topology: Topology, actor: str, target: str) -> bool:
    """Destroy: a descendant, never self and never an ancestor."""
    return may_manage(topology, actor, target) and not is_descendant_of(topology, actor, target)


@dataclass(frozen=True, slots=True)
class RouteDecision:
    """Whether a message may go, and which rule decided."""

    allowed: bool
    rule: str


def check_route(
    topology: Topology,
    sender: str,
    recipient: str,
    allowed_recipients: Iterable[str] = (),
    extra_recipients: Iterable[str] = (),
) -> RouteDecision:
    """Decide a ``send`` (target table of spec 004), naming the deciding rule."""
    parent = topology.get(sender)
    resolved_parent = parent if parent is not None else OPERATOR
    if recipient == resolved_parent:
        return RouteDecision(True, "parent is always reachable")
    allow = list(allowed_recipients)
    if allow:
        if recipient in allow:
            return RouteDecision(True, "in allowed_recipients")
        return RouteDecision(False, "allowed_recipients restricts this agent to " + repr(allow))
    if recipient in set(extra_recipients):
        return RouteDecision(True, "in extra_recipients")
    if recipient == sender:
        return RouteDecision(True, "self")
    if recipient == OPERATOR:
        return RouteDecision(True, "operator")
    if topology.get(recipient) == parent:  # an agent missing from the file is a root
        return RouteDecision(True, "sibling (same parent)")
    if is_descendant_of(topology, recipient, sender):
        return RouteDecision(True, "descendant")
    return RouteDecision(
        False, "family rule: only self, parent, siblings, descendants and the operator"
    )


def may_route(
    topology: Topology,
    sender: str,
    recipient: str,
    allowed_recipients: Iterable[str] = (),
    extra_recipients: Iterable[str] = (),
) -> bool:
    """True if ``sender`` may message ``recipient`` (see :func:`check_route`)."""
    return check_route(topology, sender, recipient, allowed_recipients, extra_recipients).allowed


def refuse_route(sender: str, recipient: str, decision: RouteDecision) -> RouteRefused:
    """The error for a refused route, saying how to get it allowed."""
    return RouteRefused(
        f"{sender!r} may not message {recipient!r} ({decision.rule}); ask the operator "
        f"to add {recipient!r} to {sender}'s extra_recipients, or message your parent"
    )


def read_topology_file(path: Path) -> dict[str, str | None]:
    """An older home's ``topology.json``, read tolerantly (for adopting it once).

    Missing or unparsable → empty (every agent a root), with a warning that
    names the file; malformed entries are skipped one by one.
    """
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        log.warning("cannot read %s (%s); treating every agent as a root", path, exc)
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        log.warning(
            "%s is not valid JSON (%s); treating every agent as a root. Fix the file "
            "or reparent agents again to rewrite it",
            path,
            exc,
        )
        return {}
    if not isinstance(data, dict):
        log.warning("%s is not a JSON object; treating every agent as a root", path)
        return {}
    out: dict[str, str | None] = {}
    for name, parent in data.items():
        if isinstance(name, str) and (parent is None or isinstance(parent, str)):
            out[name] = parent
        else:
            log.warning("%s: skipping malformed entry %r: %r", path, name, parent)
    return out


class TopologyStore:
    """The tree in the hive's store, cached in memory for routing.

    Routing reads the tree on every send: :meth:`view` is the cached tree itself
    (read-only; a write replaces it), :meth:`read_cached` a copy. Only the
    active coordinator writes, and it loads the tree from the store when it
    starts (a standby taking over included), so the cache cannot go stale.
    """

    def __init__(self, repo: TopologyRepo) -> None:
        self._repo = repo
        self._tree: dict[str, str | None] = {}

    async def load(self) -> dict[str, str | None]:
        self._tree = await self._repo.get()
        return dict(self._tree)

    def read_cached(self) -> dict[str, str | None]:
        return dict(self._tree)

    def view(self) -> Topology:
        """The cached tree, not copied (a send reads it; a copy per send grew with the hive).

        Never changed in place: a write replaces it, so a caller holding it sees one tree.
        """
        return self._tree

    async def write(self, tree: Topology, note: str) -> DeployEntry | None:
        """Store ``tree`` (one logged entry); ``None`` and nothing written if unchanged."""
        snapshot = dict(tree)
        if snapshot == self._tree:
            return None
        entry = await self._repo.set(snapshot, note)
        self._tree = snapshot
        return entry

    async def set_parent(
        self, child: str, new_parent: str | None, known: Iterable[str]
    ) -> tuple[dict[str, str | None], bool]:
        """Apply the pure rule; writes nothing on a no-op."""
        updated, changed = apply_set_parent(self._tree, child, new_parent, known)
        if changed:
            where = f"under {new_parent}" if new_parent is not None else "to a root"
            await self.write(updated, f"set parent: {child} {where}")
        return updated, changed
