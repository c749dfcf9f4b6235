"""Pure module: no I/O. What the pages show, computed from plain rows.

The tree (roots first), message threads (by ``in_reply_to``), the
``--tools``/``--allowedTools`` a set of toggles resolves to, the
compaction rule in words, and each budget scope's meters.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hyperhive.budgets import HIVE_SCOPE, LIMIT_KEYS, LimitKey
from hyperhive.config import AgentConfig
from hyperhive.core.dashboard.pictures.gauges import BudgetRow, Meter
from hyperhive.effective import turn_tool_args
from hyperhive.errors import InvalidRequest
from hyperhive.permissions import Capability, ToolGroup
from hyperhive.protocol import BudgetScope, BudgetView

__all__ = [
    "Thread",
    "TreeRow",
    "budget_row",
    "budget_rows",
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


def budget_row(scope: BudgetScope, hive: BudgetScope) -> BudgetRow:
    """A scope's meters: today's USD always (a limit or not), and each other limit it has."""
    spent: dict[LimitKey, float] = {
        "usd_per_day": scope.today.usd,
        "usd_total": scope.total.usd,
        "tokens_per_day": scope.today.tokens,
        "tokens_total": scope.total.tokens,
    }
    meters = [
        Meter(key, spent[key], scope.effective.get(key))
        for key in LIMIT_KEYS
        if key == "usd_per_day" or scope.effective.get(key) is not None
    ]
    # Its own limit, else the hive's (which holds every agent: it names itself).
    held = scope.over or hive.over
    label = "whole hive" if scope.scope == HIVE_SCOPE else scope.scope
    return BudgetRow(scope.scope, label, tuple(meters), held)


def budget_rows(view: BudgetView) -> tuple[list[BudgetRow], list[str]]:
    """The hive's row and every agent's with a limit or held; the agents with neither."""
    hive = next(s for s in view.scopes if s.scope == HIVE_SCOPE)
    rows, unlimited = [], []
    for scope in view.scopes:
        row = budget_row(scope, hive)
        limited = any(v is not None for v in scope.effective.values())
        if scope.scope == HIVE_SCOPE or limited or row.held:
            rows.append(row)
        else:
            unlimited.append(scope.scope)
    return rows, unlimited
