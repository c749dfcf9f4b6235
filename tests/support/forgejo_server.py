"""A scripted Forgejo: the v1 REST API the hive uses, with real state, and git over HTTP.

Forgejo cannot be installed here (not in Debian, PyPI or npm), so the tests run
against this server the way the claude tests run against ``model_server``.

- Every request is checked against the contract read from the typed client
  library (:mod:`tests.support.forgejo_contract`): an unknown route, an unknown
  or mistyped body field or query parameter, or a missing required field is
  answered 422/404/405 and recorded in :attr:`FakeForgejo.rejected`, never
  acted on. Every answer is checked against the response type the client
  parses it as, before it is sent.
- State is real: users (password, active, prohibit_login), personal tokens
  (created and deleted under basic auth only, as Forgejo does), orgs and
  teams, repositories (bare git repos on disk, initialised with a README on
  the default branch), collaborators, branch protections and notifications.
- ``/<owner>/<repo>.git/…`` is served by Debian git's ``git http-backend``
  (CGI): anonymous read of public repositories; pushing needs basic auth
  (user + password or token) of a write collaborator; a protected branch
  with ``enable_push = false`` is refused by a ``pre-receive`` hook, as
  Forgejo refuses it.
"""

from __future__ import annotations

import base64
import logging
import os
import secrets
import socket
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import anyio
import anyio.to_thread
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.support.forgejo_api import ForgejoApi
from tests.support.forgejo_contract import Operation, RequestRejected, contract

__all__ = ["FakeForgejo", "Recorded"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    operation: str | None
    status: int
    user: str | None


class FakeForgejo(ForgejoApi):
    """The server; a context manager running uvicorn in a thread (like ``ModelServer``)."""

    def __init__(self, root: Path | None = None) -> None:
        self._tmp = None if root is not None else tempfile.TemporaryDirectory(prefix="forgejo-")
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(128)
        self.port: int = self._sock.getsockname()[1]
        super().__init__(
            root if root is not None else Path(self._tmp.name),  # type: ignore[union-attr]
            f"http://127.0.0.1:{self.port}",
        )
        self.recorded: list[Recorded] = []
        self.rejected: list[tuple[str, str]] = []  # (request line, why) the contract refused
        self.down = False  # answer every API request 503, as a forge being restarted
        self._server = uvicorn.Server(
            uvicorn.Config(
                self._app(),
                log_config=None,
                log_level="warning",
                access_log=False,
                lifespan="off",
                timeout_graceful_shutdown=1,
            )
        )
        self._thread: threading.Thread | None = None
        contract()  # read once, before the first request waits on it

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> FakeForgejo:
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._sock]},
            name=f"forgejo-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self._sock.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> FakeForgejo:
        return self.start()

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> FakeForgejo:
        return self.start()

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await anyio.to_thread.run_sync(self.stop)

    def _app(self) -> Starlette:
        methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
        return Starlette(
            routes=[
                Route("/api/v1/{path:path}", self._api, methods=methods),
                Route("/{owner}/{repo}.git/{rest:path}", self._git, methods=["GET", "POST"]),
            ]
        )

    # -- authentication --------------------------------------------------------------

    def _principal(self, request: Request) -> tuple[str | None, str]:
        """``(user, how)``: how is "token", "basic" or "" (anonymous); raises 401."""
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        scheme = scheme.lower()
        if not header:
            return None, ""
        if scheme in ("token", "bearer"):
            token = self.tokens.get(value.strip())
            if token is None:
                raise RequestRejected(401, "token is required / invalid token")
            return self._usable(token.user), "token"
        if scheme == "basic":
            try:
                login, _, secret = base64.b64decode(value).decode().partition(":")
            except ValueError as exc:
                raise RequestRejected(401, "malformed basic auth") from exc
            user = self.users.get(login)
            token = self.tokens.get(secret)
            if user is not None and secrets.compare_digest(user.password, secret):
                return self._usable(login), "basic"
            if token is not None and token.user == login:
                return self._usable(login), "token"
            raise RequestRejected(401, "user or password is invalid")
        raise RequestRejected(401, f"unsupported authorization scheme {scheme!r}")

    def _usable(self, login: str) -> str:
        user = self.users[login]
        if not user.active or user.prohibit_login:
            raise RequestRejected(403, f"user {login} is prohibited from signing in")
        return login

    # -- the API ---------------------------------------------------------------------

    async def _api(self, request: Request) -> Response:
        path = request.path_params["path"]
        line = f"{request.method} /api/v1/{path}"
        op: Operation | None = None
        user: str | None = None
        raw = await request.body()
        try:
            if self.down:
                raise RequestRejected(503, "forge is restarting")
            try:
                op, params = contract().match(request.method, path)
                query = op.validate_query(list(request.query_params.multi_items()))
                body = op.validate_body(raw)
            except RequestRejected as exc:
                self.rejected.append((line, exc.message))  # the contract refused it
                raise
            with self._lock:
                user, how = self._principal(request)
                handler = getattr(self, f"_op_{op.name}", None)
                if handler is None:
                    raise RequestRejected(501, f"the scripted forge does not implement {op.name}")
                status, payload = handler(user, how, params, query, body)
            if status < 300 and payload is not None:
                op.check_response(payload)
        except RequestRejected as exc:
            self.recorded.append(
                Recorded(request.method, path, op.name if op else None, exc.status, user)
            )
            return JSONResponse({"message": exc.message, "url": self.url}, status_code=exc.status)
        self.recorded.append(Recorded(request.method, path, op.name, status, user))
        if payload is None:
            return Response(status_code=status)
        return JSONResponse(payload, status_code=status)

    # -- git over HTTP -----------------------------------------------------------------

    async def _git(self, request: Request) -> Response:
        owner, name, rest = (request.path_params[k] for k in ("owner", "repo", "rest"))
        repo = self.repos.get(f"{owner}/{name}")
        if repo is None:
            return Response("repository does not exist\n", status_code=404)
        push = request.query_params.get("service") == "git-receive-pack" or rest.endswith(
            "git-receive-pack"
        )
        try:
            with self._lock:
                user, _ = self._principal(request)
        except RequestRejected as exc:
            return Response(exc.message + "\n", status_code=exc.status)
        allowed = user is not None and (
            repo.collaborators.get(user) in ("write", "admin") or self._can_admin(user, repo)
            if push
            else self._can_read(user, repo)
        )
        if not allowed and (push or repo.private):
            if user is not None:
                self.recorded.append(
                    Recorded(request.method, f"{owner}/{name}.git/{rest}", None, 403, user)
                )
                return Response(
                    f"{user} may not {'push to' if push else 'read'} {repo.full_name}\n",
                    status_code=403,
                )
            return Response(
                "authentication required\n",
                status_code=401,
                headers={"WWW-Authenticate": 'Basic realm="Gitea"'},
            )
        body = await request.body()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.git_root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": f"/{owner}/{name}.git/{rest}",
            "QUERY_STRING": request.url.query,
            "REQUEST_METHOD": request.method,
            "CONTENT_TYPE": request.headers.get("content-type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": user or "",
            "REMOTE_ADDR": "127.0.0.1",
            "HOME": str(self.root),
        }
        if request.headers.get("content-encoding"):
            env["HTTP_CONTENT_ENCODING"] = request.headers["content-encoding"]
        if request.headers.get("git-protocol"):
            env["GIT_PROTOCOL"] = request.headers["git-protocol"]
        result = await anyio.run_process(["git", "http-backend"], input=body, env=env, check=False)
        self.recorded.append(
            Recorded(request.method, f"{owner}/{name}.git/{rest}", None, 200, user)
        )
        return _cgi_response(result.stdout)


def _cgi_response(out: bytes) -> Response:
    head, sep, body = out.partition(b"\r\n\r\n")
    if not sep:
        head, _, body = out.partition(b"\n\n")
    status = 200
    headers: dict[str, str] = {}
    for line in head.decode("latin-1").splitlines():
        key, _, value = line.partition(":")
        if key.lower() == "status":
            status = int(value.strip().split()[0])
        elif key:
            headers[key] = value.strip()
    return Response(body, status_code=status, headers=headers)
