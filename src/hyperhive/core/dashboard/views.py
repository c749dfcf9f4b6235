"""Pure module: no I/O. What the pages show, computed from plain rows.

The tree (roots first), message threads (by ``in_reply_to``), the
``--tools``/``--allowedTools`` a set of toggles resolves to, and the
compaction rule in words.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hyperhive.config import AgentConfig
from hyperhive.effective import turn_tool_args
from hyperhive.errors import InvalidRequest
from hyperhive.permissions import Capability, ToolGroup

__all__ = [
    "Thread",
    "TreeRow",
    "compact_rule",
    "perms_preview",
    "thread_messages",
    "tree_rows",
]


@dataclass(frozen=True)
class TreeRow:
    depth: int
    agent: Mapping[str, Any]


def tree_rows(agents: Sequence[Mapping[str, Any]]) -> list[TreeRow]:
    """Depth-first rows, roots (no parent, or a parent that is gone) first, names sorted.

    A malformed topology with a cycle still lists every agent exactly once.
    """
    by_name = {str(a["name"]): a for a in agents}
    children: dict[str | None, list[str]] = {}
    for name, a in by_name.items():
        parent = a.get("parent")
        key = parent if parent in by_name else None
        children.setdefault(key, []).append(name)
    out: list[TreeRow] = []
    seen: set[str] = set()

    def walk(name: str, depth: int) -> None:
        if name in seen:
            return
        seen.add(name)
        out.append(TreeRow(depth, by_name[name]))
        for child in sorted(children.get(name, [])):
            walk(child, depth + 1)

    for root in sorted(children.get(None, [])):
        walk(root, 0)
    for name in sorted(by_name):  # only reached inside a cycle
        walk(name, 0)
    return out


@dataclass
class Thread:
    root: Mapping[str, Any]
    replies: list[tuple[int, Mapping[str, Any]]] = field(default_factory=list)
    last_at: float = 0.0

    @property
    def messages(self) -> list[tuple[int, Mapping[str, Any]]]:
        return [(0, self.root), *self.replies]


def thread_messages(messages: Iterable[Mapping[str, Any]]) -> list[Thread]:
    """Group messages into threads by ``in_reply_to``; newest activity first.

    A reply whose parent is not among ``messages`` starts its own thread.
    """
    by_id = {int(m["id"]): m for m in messages}
    kids: dict[int, list[int]] = {}
    roots: list[int] = []
    for mid in sorted(by_id):
        parent = by_id[mid].get("in_reply_to")
        if parent is not None and int(parent) in by_id and int(parent) != mid:
            kids.setdefault(int(parent), []).append(mid)
        else:
            roots.append(mid)
    threads: list[Thread] = []
    for rid in roots:
        thread = Thread(by_id[rid], last_at=float(by_id[rid]["created_at"]))
        stack = [(1, k) for k in reversed(kids.get(rid, []))]
        while stack:
            depth, mid = stack.pop()
            msg = by_id[mid]
            thread.replies.append((depth, msg))
            thread.last_at = max(thread.last_at, float(msg["created_at"]))
            stack.extend((depth + 1, k) for k in reversed(kids.get(mid, [])))
        threads.append(thread)
    threads.sort(key=lambda t: t.last_at, reverse=True)
    return threads


def perms_preview(
    groups: Iterable[str],
    capabilities: Iterable[str] = (),
    config: AgentConfig | None = None,
) -> dict[str, Any]:
    """The exact ``--tools`` / ``--allowedTools`` an agent with ``config`` would get with the
    toggled groups and capabilities (its own MCP servers included, ``bash`` only with
    ``execution``, as :mod:`hyperhive.effective` decides for its turns).

    Refuses what ``perms_set`` refuses (unknown names, no group at all), in its words.
    """
    try:
        resolved = [ToolGroup(g.strip().lower()) for g in groups if g.strip()]
        caps = [Capability(c.strip().lower()) for c in capabilities if c.strip()]
    except ValueError as exc:
        raise InvalidRequest(f"{exc}; known groups: {', '.join(ToolGroup.ALL)}") from exc
    if not resolved:
        raise InvalidRequest("an agent needs at least one tool group")
    resolved = list(dict.fromkeys(resolved))
    args = turn_tool_args(config or AgentConfig(), resolved, caps)
    return {
        "tool_groups": [g.value for g in resolved],
        "capabilities": [c.value for c in caps],
        "tools_arg": args.tools,
        "allowed_tools_arg": args.allowed_tools,
    }


def compact_rule(usage: float | None, threshold: float) -> str:
    """The operator's compact is ungated; the agent's own keeps the 66% rule."""
    rule = (
        "yours runs at any usage; the agent's own compact tool is allowed above "
        f"{threshold:.0%} of the context window"
    )
    if usage is None:
        return f"{rule}; no turn recorded yet"
    verdict = "allowed now" if usage > threshold else "not yet"
    return f"{rule}; the last turn used {usage:.0%} (its own: {verdict})"
