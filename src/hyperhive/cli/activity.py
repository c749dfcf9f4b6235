"""hivectl activity: the dashboard's front-page feed in the terminal, followed live.

It reads the coordinator's operator socket, not the dashboard: the socket is
``hivectl``'s one channel (no URL or token to find, and it answers with the
dashboard off), and a long-poll there answers with the new items themselves,
where the dashboard's event stream only says "the feed changed" and a client
would fetch the page again.
"""

from __future__ import annotations

import time

import click

from hyperhive.cli.base import _Ctx, main, pass_ctx
from hyperhive.cli.follow import follow
from hyperhive.cli.output import emit, emit_line, json_mode, json_output
from hyperhive.core.activity import quote
from hyperhive.core.dashboard.feed import KINDS, Cursor
from hyperhive.protocol import FOLLOW_WAIT_MAX, ActivityFeed, FeedEntry, OpActivityReq

__all__ = ["activity", "entry_line"]

FEED_START = Cursor(0.0, 0, 0)  # before anything the feed can hold


def entry_line(e: FeedEntry) -> str:
    """``12:03:04 message  alice → operator: the text`` (one line, the body cut short)."""
    at = time.strftime("%H:%M:%S", time.localtime(e.at))
    body = f": {quote(e.body, 200)}" if e.body else ""
    return f"{at} {e.kind:10} {e.title}{body}"


@main.command()
@click.option("--agent", default=None, help="Only what concerns this agent.")
@click.option(
    "--kind",
    type=click.Choice(KINDS),
    default=None,
    help="Only this kind of event.",
)
@click.option("-n", "--limit", default=20, show_default=True, type=click.IntRange(1, 500))
@click.option("-f", "--follow", "keep", is_flag=True, help="Keep printing new events (Ctrl-C).")
@json_output(ActivityFeed)
@pass_ctx
def activity(
    obj: _Ctx, agent: str | None, kind: str | None, limit: int, keep: bool, as_json: bool
) -> None:
    """What the hive did, as the dashboard's front page shows it: messages, turns with
    their cost, spawns, crashes, approvals, budget notices… Oldest of the last N first;
    -f keeps printing new events as they happen."""
    base = OpActivityReq(cmd="activity", agent=agent, kind=kind or "", limit=limit)
    page = obj.call(base)

    def human(feed: ActivityFeed) -> None:
        if not feed.items and not keep:
            click.echo("(nothing yet)")
        for e in reversed(feed.items):
            click.echo(entry_line(e))

    if keep and json_mode():
        emit_line(page)  # JSON Lines from the first batch on
    else:
        emit(page, human)
    if not keep:
        return

    async def step(after: str) -> str:
        req = base.model_copy(update={"after": after, "limit": 100, "wait": FOLLOW_WAIT_MAX})
        feed = await obj.acall(req, FOLLOW_WAIT_MAX + 30)
        if feed.items:
            if json_mode():
                emit_line(feed)
            else:
                for e in reversed(feed.items):
                    click.echo(entry_line(e))
        return feed.newest or after

    # Nothing shown yet: everything that comes is new.
    follow("the activity feed", page.newest or str(FEED_START), step)
