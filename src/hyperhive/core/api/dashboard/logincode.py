"""Pure module: no I/O. One-click log-in codes: short-lived, single-use, minted from the token.

A code is ``<issued>.<nonce>.<mac>``: the issue time (unix seconds), a random
nonce, and an HMAC-SHA256 of both keyed by the operator token. Whoever can
read the token file (the operator's ``hivectl``) mints one without asking the
server, and the code reveals nothing of the token. The server checks the MAC
and the age, and remembers the nonces it accepted until they expire, so a code
logs in once. A code minted before the server started is refused as well: a
restart forgets the nonces, and "once" must survive it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["LOGIN_CODE_TTL", "CodeRefusal", "LoginCodes", "check_code", "mint_code"]

LOGIN_CODE_TTL = 15 * 60.0
# A little slack for a code minted by another process a moment "before" the
# server's clock reading of its own start.
_CLOCK_SLACK = 2.0
_CODE = re.compile(r"(\d{1,12})\.([A-Za-z0-9_-]{16,64})\.([A-Za-z0-9_-]{43})")


class CodeRefusal(StrEnum):
    """Why a code does not log in; the value is the sentence the operator reads."""

    INVALID = (
        "This log-in link is not valid for this hive (it is damaged, from another hive, "
        "or the operator token has changed since)."
    )
    EXPIRED = f"This log-in link has expired: a link works for {LOGIN_CODE_TTL / 60:.0f} minutes."
    USED = "This log-in link has already been used: each link logs in once."
    STALE = "This log-in link was made before the dashboard last restarted."


def _mac(token: str, issued: int, nonce: str) -> str:
    digest = hmac.new(token.encode(), f"login:{issued}:{nonce}".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(digest.digest()).decode().rstrip("=")


def mint_code(token: str, *, now: float, nonce: str) -> str:
    """A code for ``token`` issued at ``now``; ``nonce`` must be fresh randomness."""
    issued = int(now)
    return f"{issued}.{nonce}.{_mac(token, issued, nonce)}"


def check_code(
    token: str, code: str, *, now: float, not_before: float, ttl: float = LOGIN_CODE_TTL
) -> tuple[str, float] | CodeRefusal:
    """``(nonce, expires_at)`` for a genuine, current code; else why not (ignoring reuse)."""
    match = _CODE.fullmatch(code)
    if match is None:
        return CodeRefusal.INVALID
    issued, nonce, mac = int(match[1]), match[2], match[3]
    if not hmac.compare_digest(mac, _mac(token, issued, nonce)):
        return CodeRefusal.INVALID
    if issued > now + _CLOCK_SLACK:
        return CodeRefusal.INVALID
    if now - issued > ttl:
        return CodeRefusal.EXPIRED
    if issued < int(not_before) - _CLOCK_SLACK:
        return CodeRefusal.STALE
    return nonce, issued + ttl


@dataclass
class LoginCodes:
    """The server's side: which codes it accepted, until they would have expired anyway."""

    token: str
    not_before: float
    ttl: float = LOGIN_CODE_TTL
    _used: dict[str, float] = field(default_factory=dict)

    def redeem(self, code: str, now: float) -> CodeRefusal | None:
        """None when ``code`` logs in (and never again); otherwise the refusal."""
        self._used = {n: until for n, until in self._used.items() if until >= now}
        verdict = check_code(self.token, code, now=now, not_before=self.not_before, ttl=self.ttl)
        if isinstance(verdict, CodeRefusal):
            return verdict
        nonce, expires = verdict
        if nonce in self._used:
            return CodeRefusal.USED
        self._used[nonce] = expires
        return None
