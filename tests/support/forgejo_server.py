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
import datetime as dt
import hashlib
import json
import logging
import os
import secrets
import socket
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import anyio.to_thread
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.support.forgejo_contract import Operation, RequestRejected, contract

__all__ = ["FakeForgejo", "Recorded"]

log = logging.getLogger(__name__)

ADMIN = "root"
_PRE_RECEIVE = """#!/bin/sh
# Refuse direct pushes to protected branches (Forgejo: enable_push = false).
while read old new ref; do
  if grep -qxF "$ref" "$GIT_DIR/hh-protected" 2>/dev/null; then
    echo "branch ${ref#refs/heads/} is protected: push another branch and open a pull request" >&2
    exit 1
  fi
done
"""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


@dataclass
class _User:
    login: str
    email: str
    password: str
    full_name: str = ""
    admin: bool = False
    active: bool = True
    prohibit_login: bool = False
    id: int = 0


@dataclass
class _Token:
    id: int
    user: str
    name: str
    sha1: str
    scopes: list[str]


@dataclass
class _Repo:
    org: str
    name: str
    description: str
    private: bool
    default_branch: str
    id: int
    collaborators: dict[str, str] = field(default_factory=dict)
    protections: list[dict[str, Any]] = field(default_factory=list)

    @property
    def full_name(self) -> str:
        return f"{self.org}/{self.name}"


@dataclass
class _Thread:
    id: int
    user: str
    repo: str
    title: str
    kind: str
    html_url: str
    updated_at: dt.datetime
    unread: bool = True


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    operation: str | None
    status: int
    user: str | None


class FakeForgejo:
    """The server; a context manager running uvicorn in a thread (like ``ModelServer``)."""

    def __init__(self, root: Path | None = None) -> None:
        self._tmp = None if root is not None else tempfile.TemporaryDirectory(prefix="forgejo-")
        self.root = root if root is not None else Path(self._tmp.name)  # type: ignore[union-attr]
        self.git_root = self.root / "git"
        self.git_root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self.users: dict[str, _User] = {}
        self.tokens: dict[str, _Token] = {}
        self.orgs: dict[str, dict[str, list[str]]] = {}  # org -> team -> members
        self.repos: dict[str, _Repo] = {}
        self.threads: list[_Thread] = []
        self.recorded: list[Recorded] = []
        self.rejected: list[tuple[str, str]] = []  # (request line, why) the contract refused
        self.down = False  # answer every API request 503, as a forge being restarted
        self._ids = 0
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(128)
        self.port: int = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
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
        self.add_user(ADMIN, admin=True)
        self.admin_token = self.issue_token(ADMIN, "admin", ["all"])

    # -- test-side state ------------------------------------------------------------

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    def add_user(self, login: str, *, admin: bool = False, password: str | None = None) -> _User:
        with self._lock:
            user = _User(
                login,
                f"{login}@example.invalid",
                password or secrets.token_hex(8),
                admin=admin,
                id=self._next_id(),
            )
            self.users[login] = user
            return user

    def issue_token(self, login: str, name: str, scopes: list[str]) -> str:
        with self._lock:
            sha1 = hashlib.sha1(secrets.token_bytes(20)).hexdigest()
            self.tokens[sha1] = _Token(self._next_id(), login, name, sha1, scopes)
            return sha1

    def add_org(self, org: str, owners: list[str] | None = None) -> None:
        with self._lock:
            self.orgs[org] = {"Owners": list(owners or [ADMIN])}

    def notify(self, login: str, repo: str, title: str, *, kind: str = "Pull") -> int:
        """A notification for ``login`` (a review or a comment on a pull request)."""
        with self._lock:
            number = len(self.threads) + 1
            thread = _Thread(
                self._next_id(),
                login,
                repo,
                title,
                kind,
                f"{self.url}/{repo}/pulls/{number}#issuecomment-{number}",
                _now(),
            )
            self.threads.append(thread)
            return thread.id

    def tokens_of(self, login: str) -> list[_Token]:
        with self._lock:
            return [t for t in self.tokens.values() if t.user == login]

    def unread(self, login: str) -> list[int]:
        with self._lock:
            return [t.id for t in self.threads if t.user == login and t.unread]

    def branches(self, full_name: str) -> dict[str, str]:
        """``branch -> commit`` of a repository, read with git from the bare repo."""
        out = subprocess.run(
            ["git", "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads"],
            cwd=self.git_root / f"{full_name}.git",
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return dict(line.split(" ", 1) for line in out.splitlines())

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

    def _need(self, user: str | None, *, admin: bool = False) -> str:
        if user is None:
            raise RequestRejected(401, "token is required")
        if admin and not self.users[user].admin:
            raise RequestRejected(403, "you must be an admin")
        return user

    def _user_json(self, u: _User) -> dict[str, Any]:
        return {
            "id": u.id,
            "login": u.login,
            "full_name": u.full_name,
            "email": u.email,
            "is_admin": u.admin,
            "active": u.active,
            "prohibit_login": u.prohibit_login,
            "html_url": f"{self.url}/{u.login}",
        }

    def _repo_json(self, r: _Repo) -> dict[str, Any]:
        return {
            "id": r.id,
            "name": r.name,
            "full_name": r.full_name,
            "description": r.description,
            "private": r.private,
            "default_branch": r.default_branch,
            "clone_url": f"{self.url}/{r.full_name}.git",
            "html_url": f"{self.url}/{r.full_name}",
            "owner": {"login": r.org, "id": 0},
        }

    def _op_create_user(self, user: str | None, how: str, p: Any, q: Any, b: Any) -> Any:
        self._need(user, admin=True)
        if b["username"] in self.users or b["username"] in self.orgs:
            raise RequestRejected(422, f"user already exists [name: {b['username']}]")
        new = self.add_user(b["username"], password=b.get("password") or secrets.token_hex(8))
        new.email, new.full_name = b["email"], b.get("full_name") or ""
        return 201, self._user_json(new)

    def _op_edit_user(self, user: str | None, how: str, p: Any, q: Any, b: Any) -> Any:
        self._need(user, admin=True)
        target = self.users.get(p["username"])
        if target is None:
            raise RequestRejected(404, "user does not exist")
        for key in ("password", "full_name", "active", "prohibit_login", "email"):
            if b.get(key) is not None:
                setattr(target, key, b[key])
        return 200, self._user_json(target)

    def _op_delete_user(self, user: str | None, how: str, p: Any, q: Any, b: Any) -> Any:
        self._need(user, admin=True)
        if self.users.pop(p["username"], None) is None:
            raise RequestRejected(404, "user does not exist")
        for sha1, t in list(self.tokens.items()):
            if t.user == p["username"]:
                del self.tokens[sha1]
        return 204, None

    def _op_get(self, user: str | None, how: str, p: Any, q: Any, b: Any) -> Any:
        target = self.users.get(p["username"])
        if target is None:
            raise RequestRejected(404, "user does not exist")
        return 200, self._user_json(target)

    def _op_get_current(self, user: str | None, how: str, p: Any, q: Any, b: Any) -> Any:
        return 200, self._user_json(self.users[self._need(user)])

    def _basic_self(self, user: str | None, how: str, login: str) -> None:
        # Forgejo: token management needs basic auth, and only for oneself.
        if how != "basic":
            raise RequestRejected(401, "auth required: basic authentication with a password")
        if user != login:
            raise RequestRejected(403, "you may only manage your own tokens")

    def _op_create_token(self, user: str | None, how: str, p: Any, q: Any, b: Any) -> Any:
        self._basic_self(user, how, p["username"])
        if any(t.name == b["name"] for t in self.tokens_of(p["username"])):
            raise RequestRejected(400, "access token name has been used already")
        sha1 = self.issue_token(p["username"], b["name"], list(b.get("scopes") or []))
        t = self.tokens[sha1]
        return 201, {
            "id": t.id,
            "name": t.name,
            "sha1": t.sha1,
            "token_last_eight": t.sha1[-8:],
            "scopes": t.scopes,
        }

    def _op_delete_access_token(self, user: str | None, how: str, p: Any, q: Any, b: Any) -> Any:
        self._basic_self(user, how, p["username"])
        for sha1, t in list(self.tokens.items()):
            if t.user == p["username"] and p["token"] in (str(t.id), t.name):
                del self.tokens[sha1]
                return 204, None
        raise RequestRejected(404, "access token does not exist")

    def _op_org_get(self, user: str | None, how: str, p: Any, q: Any, b: Any) -> Any:
        if p["org"] not in self.orgs:
            raise RequestRejected(404, "org does not exist")
        return 200, {"id": 0, "name": p["org"], "username": p["org"]}

    def _op_org_list_teams(self, user: str | None, how: str, p: Any, q: Any, b: Any) -> Any:
        self._need(user)
        teams = self.orgs.get(p["org"])
        if teams is None:
            raise RequestRejected(404, "org does not exist")
        return 200, [{"id": i, "name": name} for i, name in enumerate(teams, 1)]

    def _op_create_org_repo(self, user: str | None, how: str, p: Any, q: Any, b: Any) -> Any:
        login = self._need(user)
        teams = self.orgs.get(p["org"])
        if teams is None:
            raise RequestRejected(404, "org does not exist")
        if not self.users[login].admin and login not in teams.get("Owners", []):
            raise RequestRejected(403, "given user is not owner of organization")
        name = b["name"]
        key = f"{p['org']}/{name}"
        if any(k.lower() == key.lower() for k in self.repos):
            raise RequestRejected(409, "The repository with the same name already exists.")
        repo = _Repo(
            p["org"],
            name,
            b.get("description") or "",
            bool(b.get("private")),
            b.get("default_branch") or "main",
            self._next_id(),
        )
        self._init_git(repo, bool(b.get("auto_init")))
        self.repos[key] = repo
        return 201, self._repo_json(repo)

    def _init_git(self, repo: _Repo, auto_init: bool) -> None:
        bare = self.git_root / f"{repo.full_name}.git"
        bare.parent.mkdir(parents=True, exist_ok=True)
        git = ["git", "-c", "init.defaultBranch=" + repo.default_branch]
        subprocess.run([*git, "init", "-q", "--bare", str(bare)], check=True)
        hook = bare / "hooks" / "pre-receive"
        hook.write_text(_PRE_RECEIVE)
        hook.chmod(0o755)
        # http-backend runs as the server's user; pushes from other users' sandboxes
        # are still this process writing, so no shared-repository modes are needed.
        if auto_init:
            with tempfile.TemporaryDirectory() as work:
                env = {
                    **os.environ,
                    "GIT_AUTHOR_NAME": "forgejo",
                    "GIT_AUTHOR_EMAIL": "forgejo@example.invalid",
                    "GIT_COMMITTER_NAME": "forgejo",
                    "GIT_COMMITTER_EMAIL": "forgejo@example.invalid",
                }
                subprocess.run([*git, "init", "-q", work], check=True, env=env)
                Path(work, "README.md").write_text(f"# {repo.name}\n\n{repo.description}\n")
                subprocess.run(["git", "-C", work, "add", "README.md"], check=True, env=env)
                subprocess.run(
                    ["git", "-C", work, "commit", "-qm", "Initial commit"], check=True, env=env
                )
                subprocess.run(
                    ["git", "-C", work, "push", "-q", str(bare), f"HEAD:{repo.default_branch}"],
                    check=True,
                    env=env,
                )

    def _repo(self, p: Any) -> _Repo:
        repo = self.repos.get(f"{p['owner']}/{p['repo']}")
        if repo is None:
            raise RequestRejected(404, "repository does not exist")
        return repo

    def _can_admin(self, login: str, repo: _Repo) -> bool:
        return self.users[login].admin or login in self.orgs[repo.org].get("Owners", [])

    def _op_repo_get(self, user: str | None, how: str, p: Any, q: Any, b: Any) -> Any:
        repo = self._repo(p)
        if repo.private and (user is None or not self._can_read(user, repo)):
            raise RequestRejected(404, "repository does not exist")
        return 200, self._repo_json(repo)

    def _can_read(self, login: str, repo: _Repo) -> bool:
        return not repo.private or login in repo.collaborators or self._can_admin(login, repo)

    def _op_repo_delete(self, user: str | None, how: str, p: Any, q: Any, b: Any) -> Any:
        repo = self._repo(p)
        if not self._can_admin(self._need(user), repo):
            raise RequestRejected(403, "not an owner")
        del self.repos[repo.full_name]
        subprocess.run(["rm", "-rf", str(self.git_root / f"{repo.full_name}.git")], check=True)
        return 204, None

    def _op_org_list_repos(self, user: str | None, how: str, p: Any, q: Any, b: Any) -> Any:
        if p["org"] not in self.orgs:
            raise RequestRejected(404, "org does not exist")
        repos = [r for r in self.repos.values() if r.org == p["org"]]
        return 200, [self._repo_json(r) for r in repos if not r.private or user is not None]

    def _op_repo_add_collaborator(self, user: str | None, how: str, p: Any, q: Any, b: Any) -> Any:
        repo = self._repo(p)
        if not self._can_admin(self._need(user), repo):
            raise RequestRejected(403, "not an owner")
        if p["collaborator"] not in self.users:
            raise RequestRejected(422, "user does not exist")
        repo.collaborators[p["collaborator"]] = b.get("permission") or "write"
        return 204, None

    def _op_repo_check_collaborator(
        self, user: str | None, how: str, p: Any, q: Any, b: Any
    ) -> Any:
        self._need(user)
        if p["collaborator"] not in self._repo(p).collaborators:
            raise RequestRejected(404, "not a collaborator")
        return 204, None

    def _op_repo_list_collaborators(
        self, user: str | None, how: str, p: Any, q: Any, b: Any
    ) -> Any:
        self._need(user)
        return 200, [self._user_json(self.users[c]) for c in self._repo(p).collaborators]

    def _op_repo_create_branch_protection(
        self, user: str | None, how: str, p: Any, q: Any, b: Any
    ) -> Any:
        repo = self._repo(p)
        if not self._can_admin(self._need(user), repo):
            raise RequestRejected(403, "not an owner")
        rule = b.get("rule_name") or b.get("branch_name")
        if not rule:
            raise RequestRejected(422, "rule_name is required")
        for team in [
            *(b.get("approvals_whitelist_teams") or []),
            *(b.get("merge_whitelist_teams") or []),
        ]:
            if team not in self.orgs[repo.org]:
                raise RequestRejected(422, f"team {team!r} does not exist in {repo.org}")
        if any(x["rule_name"] == rule for x in repo.protections):
            raise RequestRejected(403, "branch protection already exists")
        protection = {**{k: v for k, v in b.items() if v is not None}, "rule_name": rule}
        repo.protections.append(protection)
        if not b.get("enable_push"):
            marker = self.git_root / f"{repo.full_name}.git" / "hh-protected"
            with marker.open("a") as fh:
                fh.write(f"refs/heads/{rule}\n")
        return 201, {**protection, "created_at": _now().isoformat()}

    def _op_repo_list_branch_protection(
        self, user: str | None, how: str, p: Any, q: Any, b: Any
    ) -> Any:
        self._need(user)
        return 200, list(self._repo(p).protections)

    def _thread_json(self, t: _Thread) -> dict[str, Any]:
        repo = self.repos.get(t.repo)
        return {
            "id": t.id,
            "unread": t.unread,
            "pinned": False,
            "updated_at": t.updated_at.isoformat(),
            "url": f"{self.url}/api/v1/notifications/threads/{t.id}",
            "repository": self._repo_json(repo) if repo else {"full_name": t.repo},
            "subject": {
                "title": t.title,
                "type": t.kind,
                "state": "open",
                "html_url": t.html_url.split("#")[0],
                "latest_comment_html_url": t.html_url,
            },
        }

    def _op_notify_get_list(self, user: str | None, how: str, p: Any, q: Any, b: Any) -> Any:
        login = self._need(user)
        statuses = q.get("status_types") or ["unread"]
        statuses = [statuses] if isinstance(statuses, str) else statuses
        rows = [
            t
            for t in self.threads
            if t.user == login and ("unread" if t.unread else "read") in statuses
        ]
        return 200, [self._thread_json(t) for t in rows]

    def _op_notify_read_thread(self, user: str | None, how: str, p: Any, q: Any, b: Any) -> Any:
        login = self._need(user)
        for t in self.threads:
            if str(t.id) == p["id"] and t.user == login:
                t.unread = q.get("to_status", "read") != "read"
                return 205, None
        raise RequestRejected(404, "notification does not exist")

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


def dump(server: FakeForgejo) -> str:
    """A compact state summary for assertion messages."""
    return json.dumps(
        {
            "users": sorted(server.users),
            "repos": sorted(server.repos),
            "rejected": server.rejected[-5:],
        }
    )
