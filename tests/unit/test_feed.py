"""The activity feed's merge of messages and approvals (pure)."""

from __future__ import annotations

from hyperhive.core.dashboard.feed import build_feed
from hyperhive.store.rows import ApprovalRow, MessageRow


def msg(mid: int, at: float, sender: str = "alice", to: str = "bob") -> MessageRow:
    return MessageRow(mid, sender, to, f"m{mid}", None, at)


def approval(aid: int, at: float, resolved: float | None = None) -> ApprovalRow:
    return ApprovalRow(
        aid,
        "init_config",
        "queen",
        "scout",
        {},
        "approved" if resolved else "pending",
        at,
        resolved_at=resolved,
        resolution="ok" if resolved else None,
    )


def test_approvals_merge_in_by_time_within_the_page() -> None:
    page = [msg(3, 30.0), msg(2, 20.0)]
    items = build_feed(page, [approval(1, 25.0, resolved=35.0), approval(2, 5.0)], more=True)
    assert [(i.kind, i.at) for i in items] == [
        ("approval", 35.0),
        ("message", 30.0),
        ("approval", 25.0),
        ("message", 20.0),
    ]  # approval 2 (at 5) is older than the page: it belongs to the next one
    last = build_feed(page, [approval(2, 5.0)], more=False)
    assert [i.at for i in last] == [30.0, 20.0, 5.0]


def test_filters_by_kind_and_agent() -> None:
    page = [msg(2, 20.0, "bob", "carol"), msg(1, 10.0)]
    both = build_feed(page, [approval(1, 15.0)], more=False)
    assert [i.kind for i in build_feed(page, [approval(1, 15.0)], more=False, kind="message")] == [
        "message",
        "message",
    ]
    assert len(both) == 3
    carol = build_feed(page, [approval(1, 15.0)], more=False, agent="carol")
    assert [i.message_id for i in carol] == [2]
    scout = build_feed(page, [approval(1, 15.0)], more=False, agent="scout")
    assert [i.kind for i in scout] == ["approval"]
    assert [i.state for i in build_feed([msg(1, 1.0)], [], more=False)] == ["queued"]
