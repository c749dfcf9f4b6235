"""What ``hivectl doctor`` reports: one :class:`Check` per thing checked.

``hivectl doctor --json`` prints a :class:`DoctorReport` (``docs/cli-json.md``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["Check", "DoctorReport", "Status", "fail", "ok", "skip"]

Status = Literal["ok", "fail", "skip"]


class Check(BaseModel):
    """``skip``: not applicable here (no forge configured, the hive not running)."""

    model_config = ConfigDict(frozen=True)

    name: str
    status: Status
    detail: str
    remedy: str | None = None


class DoctorReport(BaseModel):
    """``ok`` is false when any check failed (and ``hivectl doctor`` exits non-zero)."""

    ok: bool
    home: str
    checks: list[Check]


def ok(name: str, detail: str) -> Check:
    return Check(name=name, status="ok", detail=detail)


def fail(name: str, detail: str, remedy: str) -> Check:
    return Check(name=name, status="fail", detail=detail, remedy=remedy)


def skip(name: str, detail: str) -> Check:
    return Check(name=name, status="skip", detail=detail)
