"""Who may use the dashboard, and which POSTs are really the operator's.

By default the operator token (``run/dashboard-token``, 0600) is required,
on loopback too: every agent sandbox shares the host's network, so reaching
a loopback port proves nothing. ``dashboard_auth = "loopback"`` (for hives
whose agents cannot reach loopback) trusts a loopback bind instead; then the
``Host`` header must name a loopback address (no DNS rebinding) and a POST
carrying a foreign ``Origin`` is refused. With the token —
as ``Authorization: Bearer`` or as the HttpOnly cookie that the login form
or a one-click log-in link (:mod:`.logincode`) sets — every
cookie-authenticated POST must echo the ``hive_csrf`` cookie in an
``X-CSRF-Token`` header (double submit), on top of the origin check.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import quote, urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hyperhive.atomic import atomic_write_text
from hyperhive.core.api.dashboard.frontdoor import TOKEN_FILE, is_loopback

__all__ = [
    "AUTH_COOKIE",
    "CSRF_COOKIE",
    "CSRF_HEADER",
    "Guard",
    "Security",
    "ensure_token",
    "is_loopback",
    "safe_next",
]

AUTH_COOKIE = "hive_token"
CSRF_COOKIE = "hive_csrf"
CSRF_HEADER = "x-csrf-token"
_PUBLIC = ("/login", "/static/", "/healthz")
_UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def ensure_token(run_dir: Path) -> str:
    """The operator token: kept across restarts (so a login survives), always 0600."""
    path = run_dir / TOKEN_FILE
    try:
        token = path.read_text().strip()
    except FileNotFoundError:
        token = ""
    if len(token) < 32:
        token = secrets.token_urlsafe(32)
        atomic_write_text(path, token + "\n", 0o600)
    os.chmod(path, 0o600)
    return token


def safe_next(target: str | None) -> str:
    """A same-site path to return to after login (never another host)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


@dataclass(frozen=True)
class Security:
    """``token`` is None in loopback mode."""

    token: str | None
    bind: str = "127.0.0.1"

    @property
    def required(self) -> bool:
        return self.token is not None

    def valid(self, candidate: str | None) -> bool:
        return self.token is not None and candidate is not None and _same(candidate, self.token)


def _host_name(host_header: str) -> str:
    if host_header.startswith("["):
        return host_header[1 : host_header.find("]")]
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


class Guard:
    """ASGI middleware enforcing :class:`Security` on every HTTP request."""

    def __init__(self, app: ASGIApp, security: Security) -> None:
        self.app = app
        self.sec = security

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        cookies = _cookies(headers.get("cookie", ""))
        path: str = scope["path"]
        method: str = scope["method"]
        host = headers.get("host", "")

        refusal = self._check(headers, cookies, path, method, host)
        if refusal is not None:
            status, code, message = refusal
            if status == 401 and method == "GET" and "text/html" in headers.get("accept", ""):
                await _redirect(send, "/login?next=" + quote(safe_next(path), safe="/"))
                return
            await _json(send, status, code, message)
            return

        csrf = cookies.get(CSRF_COOKIE)

        async def send_with_csrf(message: Message) -> None:
            if message["type"] == "http.response.start" and not csrf:
                extra = (
                    f"{CSRF_COOKIE}={secrets.token_urlsafe(24)}; Path=/; SameSite=Strict".encode()
                )
                message = {**message, "headers": [*message["headers"], (b"set-cookie", extra)]}
            await send(message)

        await self.app(scope, receive, send_with_csrf)

    def _check(
        self, headers: Headers, cookies: dict[str, str], path: str, method: str, host: str
    ) -> tuple[int, str, str] | None:
        if not self.sec.required and _host_name(host) not in _LOOPBACK_NAMES | {self.sec.bind}:
            return 421, "misdirected", f"this dashboard answers only to loopback, not {host!r}"
        if method in _UNSAFE:
            origin = headers.get("origin")
            if origin is not None and (origin == "null" or urlsplit(origin).netloc != host):
                return 403, "csrf", f"cross-site request refused (Origin {origin!r})"
            if headers.get("sec-fetch-site") == "cross-site":
                return 403, "csrf", "cross-site request refused"
        if not self.sec.required or path.startswith(_PUBLIC) and path != "/logout":
            return None
        bearer = _bearer(headers.get("authorization", ""))
        if bearer is not None:
            if self.sec.valid(bearer):
                return None
            return 401, "unauthorized", "the bearer token is not this dashboard's operator token"
        if not self.sec.valid(cookies.get(AUTH_COOKIE)):
            return 401, "unauthorized", "log in with the operator token (run/dashboard-token)"
        if method in _UNSAFE:
            sent = headers.get(CSRF_HEADER)
            expected = cookies.get(CSRF_COOKIE)
            if not sent or not expected or not _same(sent, expected):
                return (
                    403,
                    "csrf",
                    f"missing or wrong {CSRF_HEADER} (double-submit of {CSRF_COOKIE})",
                )
        return None


def _bearer(value: str) -> str | None:
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _cookies(raw: str) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:  # a malformed Cookie header is just no cookies
        return {}
    return {k: m.value for k, m in jar.items()}


async def _json(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"ok": False, "error": {"code": code, "message": message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _redirect(send: Send, location: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [(b"location", location.encode()), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})
