"""When a host credential stops being accepted: ``--expires 30d`` or a date, and how an
expiry is shown. Pure module: no I/O (``now`` is passed in)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from hyperhive.errors import InvalidRequest

__all__ = ["expired_message", "parse_expires", "when"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_SPAN = re.compile(r"(\d+)([smhdw])")

HOW = (
    "give a span (30d, 12h, 2w) or a UTC date or time (2027-01-31, 2027-01-31T12:00, "
    "2027-01-31T12:00+02:00)"
)


def parse_expires(text: str, now: float) -> float:
    """The time ``text`` names: a span from ``now``, or a date (midnight UTC) or time
    (UTC unless it says its offset). ``InvalidRequest`` if it is neither, or not after
    ``now``."""
    text = text.strip()
    span = _SPAN.fullmatch(text)
    if span is not None:
        at = now + int(span.group(1)) * _UNITS[span.group(2)]
    else:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidRequest(f"--expires {text!r} is not a span or a date: {HOW}") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        at = moment.timestamp()
    if at <= now:
        raise InvalidRequest(f"--expires {text!r} is not in the future: {HOW}")
    return at


def when(at: float) -> str:
    """An expiry as people read it: UTC, to the second."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def expired_message(host: str, at: float) -> str:
    """What the host's console and log say when its credential is past ``at``."""
    return (
        f"credential for agent host {host!r} expired at {when(at)}; run "
        f"`hivectl hosts rotate {host}` on the coordinator and give this host the new one"
    )
