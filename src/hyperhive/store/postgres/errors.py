"""psycopg's errors, translated into the hive's at the store's edge.

A lost or refused connection is :class:`~hyperhive.errors.Unavailable`: the
request was not acknowledged, the caller (an agent's harness) waits and
retries, and nothing it was told succeeded is lost. Every message names the
store by its masked URL and never carries the password.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import PoolTimeout

from hyperhive.errors import Conflict, HiveError, InvalidRequest, StorageError, Unavailable
from hyperhive.store.url import mask_url

__all__ = ["Fenced", "LogThrottle", "scrub", "translate"]

log = logging.getLogger(__name__)


class LogThrottle:
    """At most one line per key every ``every`` seconds; the line says how many it stood for.

    While the database is away every request fails, and each failure used to log: with
    a host's agents redialling, hundreds of identical lines a second.
    """

    def __init__(self, every: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._every = every
        self._clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def due(self, key: str) -> int | None:
        """The number of lines held back since the last one if a line is due, else None."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self._every:
            self._held[key] = self._held.get(key, 0) + 1
            return None
        self._last[key] = now
        return self._held.pop(key, 0)


_UNAVAILABLE = LogThrottle(every=10.0)

# States in which retrying the whole transaction is the answer, not an error.
RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)


class Fenced(Unavailable):
    """This coordinator's lease epoch was superseded: another one is active now."""

    code = "fenced"


def scrub(text: str, url: str) -> str:
    """``text`` with the URL's password removed wherever it appears."""
    try:
        password = conninfo_to_dict(url).get("password")
    except psycopg.Error:
        password = None
    out = mask_url(text)
    if password:
        out = out.replace(str(password), "***")
    return out


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    # libpq's messages run over several lines ("connection to server … failed: …").
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def translate(exc: BaseException, url: str) -> HiveError:
    """The hive error a psycopg failure means for the caller."""
    where = mask_url(url)
    reason = scrub(_reason(exc), url)
    if isinstance(exc, HiveError):
        return exc
    if isinstance(exc, psycopg.Error) and exc.sqlstate == "HHF01":
        return Fenced(
            f"this coordinator's lease lapsed or was taken over ({reason}); nothing was "
            "written: retry (it renews its lease, or stops and a standby serves)"
        )
    if isinstance(exc, PoolTimeout | psycopg.OperationalError | psycopg.InterfaceError):
        if isinstance(exc, pg_errors.DiskFull):
            return StorageError(f"the hive database {where} is out of disk space ({reason})")
        held = _UNAVAILABLE.due(where)
        if held is not None:
            more = f" ({held} more failures like it since the last line)" if held else ""
            log.warning("store %s unavailable: %s%s", where, reason, more)
        return Unavailable(
            f"the hive database {where} is unavailable ({reason}); the request was not "
            "completed: retry once it is back"
        )
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
        return Unavailable(
            f"the hive database {where} is read-only (a standby or a failover in progress): retry"
        )
    if isinstance(exc, psycopg.DataError) and "NUL" in reason:
        # Refused by the driver before it reached the server: the caller's input, not the store.
        return InvalidRequest(
            "text stored in the hive may not contain NUL (\\u0000) characters; remove them "
            "and retry"
        )
    if isinstance(exc, pg_errors.UniqueViolation):
        return Conflict(f"already exists ({reason})")
    if isinstance(exc, psycopg.Error):
        log.error("store %s refused a statement: %s", where, reason)
        return StorageError(f"the hive database {where} refused the request ({reason})")
    raise TypeError(f"not a database error: {exc!r}")
