"""HiveError → HTTP: one status per error family, the message verbatim."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse

from hyperhive.errors import (
    Conflict,
    FrameTooLarge,
    HiveError,
    InvalidRequest,
    LimitExceeded,
    NotFound,
    PermissionDenied,
    TopologyError,
    Unavailable,
)

__all__ = ["error_body", "hive_error_handler", "status_for"]

# Most specific first: LimitExceeded is also an InvalidRequest.
_STATUS: tuple[tuple[type[HiveError], int], ...] = (
    (NotFound, 404),
    (PermissionDenied, 403),
    (LimitExceeded, 413),
    (FrameTooLarge, 413),
    (InvalidRequest, 400),
    (Conflict, 409),
    (TopologyError, 409),
    (Unavailable, 503),
)


def status_for(err: HiveError) -> int:
    """The HTTP status for a hive error (ConfigError → 400, StorageError → 507, else 500)."""
    for cls, status in _STATUS:
        if isinstance(err, cls):
            return status
    if err.code == "config_error":
        return 400
    if err.code == "storage_error":
        return 507
    return 500


def error_body(code: str, message: str) -> dict[str, object]:
    return {"ok": False, "error": {"code": code, "message": message}}


async def hive_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HiveError)
    return JSONResponse(error_body(exc.code, exc.message), status_code=status_for(exc))
