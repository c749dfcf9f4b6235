"""psycopg's errors, translated into the hive's at the store's edge.

A lost or refused connection is :class:`~hyperhive.errors.Unavailable`: the
request was not acknowledged, the caller (an agent's harness) waits and
retries, and nothing it was told succeeded is lost. Every message names the
store by its masked URL and never carries the password.
"""

from __future__ import annotations

import logging

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import PoolTimeout

from hyperhive.errors import Conflict, HiveError, InvalidRequest, StorageError, Unavailable
from hyperhive.store.url import mask_url

__all__ = ["Fenced", "scrub", "translate"]

log = logging.getLogger(__name__)

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
        log.warning("store %s unavailable: %s", where, reason)
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
