"""The scripted Forgejo's state and its API operations (one ``_op_<name>`` per operation).

Every ``_op_`` is named after the pyforgejo operation it answers, so the
server's dispatch reads the handler from the contract's match. Handlers get
already-validated path, query and body values and return ``(status, payload)``
or raise :class:`RequestRejected` with the status Forgejo answers.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import secrets
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.forgejo_contract import RequestRejected

__all__ = ["ADMIN", "ForgejoApi"]

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
    max_repo_creation: int = -1
    allow_create_organization: bool = True


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


class ForgejoApi:
    """Users, tokens, orgs, repositories (bare git repos under ``git_root``), notifications."""

    def __init__(self, root: Path, url: str) -> None:
        self.url = url
        self.root = root
        self.git_root = root / "git"
        self.git_root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self.users: dict[str, _User] = {}
        self.tokens: dict[str, _Token] = {}
        self.orgs: dict[str, dict[str, list[str]]] = {}  # org -> team -> members
        self.repos: dict[str, _Repo] = {}
        self.threads: list[_Thread] = []
        self._ids = 0
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

    # -- operations ------------------------------------------------------------------

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
        for key in (
            "password",
            "full_name",
            "active",
            "prohibit_login",
            "email",
            "max_repo_creation",
            "allow_create_organization",
        ):
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
