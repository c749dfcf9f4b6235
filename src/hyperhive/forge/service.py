"""The hive's forge operations: agents' users and tokens, and their repositories.

Holds the admin credential, and so runs on the coordinator only (issue #14:
an agent's host asks it for that agent's token and repositories, see
:mod:`hyperhive.core.state.identities`). An agent never sees it: it gets a forge user of
its own and a personal token (see :mod:`hyperhive.forge.identity`), and asks
for repositories through ``create_repo``, which this module carries out with
the admin token — so the org's rules (a collaborator with write, a protected
default branch only the operator team can approve merges into) are set by the
hive, not by the agent.
"""

from __future__ import annotations

import logging
import secrets

import httpx
from pyforgejo.core.api_error import ApiError

from hyperhive.errors import HiveError, NotFound
from hyperhive.forge.client import ForgeApi, basic_auth
from hyperhive.forge.config import ForgeConfig, read_admin_token
from hyperhive.forge.errors import ForgeError, RepoNameTaken
from hyperhive.forge.rules import validate_repo_name
from hyperhive.protocol import RepoCreated

__all__ = [
    "AGENT_TOKEN_SCOPES",
    "DEFAULT_BRANCH",
    "TOKEN_NAME",
    "Forge",
    "RepoCreated",
    "revoke_agent",
]

log = logging.getLogger(__name__)

TOKEN_NAME = "hyperhive"
DEFAULT_BRANCH = "main"
# What an agent does on the forge: push branches, open and discuss pull requests,
# read and clear its notifications. No admin, no org management, no token minting.
AGENT_TOKEN_SCOPES = (
    "write:repository",
    "write:issue",
    "write:notification",
    "read:user",
    "read:organization",
)
_MARK = "hyperhive agent "


class Forge:
    """The hive's forge, administered with the admin token."""

    def __init__(
        self,
        config: ForgeConfig,
        admin_token: str,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self._transport = transport
        self.admin = ForgeApi(config.url, admin_token, whose="admin", transport=transport)

    @classmethod
    def from_config(cls, config: ForgeConfig) -> Forge:
        """Read the admin token file (refused unless 0600 and the hive's own)."""
        return cls(config, read_admin_token(config))

    async def aclose(self) -> None:
        await self.admin.aclose()

    def as_agent(self, token: str) -> ForgeApi:
        """A client acting as an agent's forge user (its own personal token)."""
        return ForgeApi(self.config.url, token, whose="agent's", transport=self._transport)

    # ---- identities -------------------------------------------------------------------

    async def provision(self, agent: str) -> str:
        """Create (or take back) ``agent``'s forge user; a fresh personal token for it.

        A user of that name that the hive did not create is refused, never taken
        over: resetting its password would lock a person out of their account.
        """
        username = self.config.username(agent)
        password = secrets.token_urlsafe(32)
        api = self.admin
        try:
            async with api.guard(f"creating forge user {username}"):
                await api.admin.create_user(
                    username=username,
                    email=f"{username}@{self.config.email_domain}",
                    password=password,
                    full_name=_MARK + agent,
                    must_change_password=False,
                    send_notify=False,
                )
        except ForgeError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ApiError) or cause.status_code not in (409, 422):
                raise
            await self._check_ours(agent, username)
        async with api.guard(f"setting up forge user {username}"):
            # create_repo is the agent's only way to a repository: no personal repos,
            # no orgs of its own. Re-enabled (and its password set) if it was disabled.
            await api.admin.edit_user(
                username,
                login_name=username,
                source_id=0,
                password=password,
                must_change_password=False,
                prohibit_login=False,
                active=True,
                max_repo_creation=0,
                allow_create_organization=False,
            )
        await self._drop_token(username, password)
        async with api.guard(f"issuing a token for forge user {username}"):
            token = await api.users.create_token(
                username,
                name=TOKEN_NAME,
                scopes=list(AGENT_TOKEN_SCOPES),
                request_options=basic_auth(username, password),
            )
        if not token.sha1:
            raise ForgeError(f"the forge at {self.config.url} issued {username} an empty token")
        log.info("forge user %s provisioned for agent %s", username, agent)
        return token.sha1

    async def _check_ours(self, agent: str, username: str) -> None:
        api = self.admin
        async with api.guard(f"looking up forge user {username}"):
            user = await api.users.get(username)
        if (user.full_name or "") != _MARK + agent:
            raise ForgeError(
                f"the forge at {self.config.url} already has a user {username!r} the hive did "
                "not create; the hive will not take it over. Set [forge] user_prefix in "
                "hive.toml (e.g. 'agent-') so agents' users get names of their own"
            )

    async def _drop_token(self, username: str, password: str) -> None:
        try:
            async with self.admin.guard(f"revoking {username}'s token", missing="no token"):
                await self.admin.users.delete_access_token(
                    username, TOKEN_NAME, request_options=basic_auth(username, password)
                )
        except NotFound:
            pass

    async def revoke(self, agent: str) -> bool:
        """Revoke ``agent``'s token and disable its user; False if it had none."""
        username = self.config.username(agent)
        api = self.admin
        try:
            async with api.guard(f"looking up forge user {username}", missing="no user"):
                user = await api.users.get(username)
        except NotFound:
            return False
        if (user.full_name or "") != _MARK + agent:
            log.warning("forge user %s was not created by the hive; leaving it alone", username)
            return False
        # Tokens are deleted only under the user's own basic auth: set a throwaway
        # password, use it once, then prohibit login so it can never be used again.
        password = secrets.token_urlsafe(32)
        async with api.guard(f"resetting forge user {username}"):
            await api.admin.edit_user(username, login_name=username, source_id=0, password=password)
        await self._drop_token(username, password)
        async with api.guard(f"disabling forge user {username}"):
            await api.admin.edit_user(
                username, login_name=username, source_id=0, prohibit_login=True, active=False
            )
        log.info("forge user %s disabled and its token revoked (agent %s)", username, agent)
        return True

    # ---- repositories ------------------------------------------------------------------

    async def create_repo(
        self, agent: str, name: str, description: str = "", private: bool = False
    ) -> RepoCreated:
        """A repository in the hive's org, ``agent`` a write collaborator, main protected.

        All three or none: if access or protection cannot be set, the new
        repository is deleted again rather than left unprotected.
        """
        validate_repo_name(name)
        org, username, api = self.config.org, self.config.username(agent), self.admin
        try:
            async with api.guard(
                f"creating repository {org}/{name}",
                missing=f"the org {org!r} does not exist on the forge at {self.config.url}; "
                f"the operator creates it (or sets [forge] org in hive.toml)",
            ):
                repo = await api.orgs.create_org_repo(
                    org,
                    name=name,
                    description=description,
                    private=private,
                    auto_init=True,
                    default_branch=DEFAULT_BRANCH,
                )
        except ForgeError as exc:
            if isinstance(exc.__cause__, ApiError) and exc.__cause__.status_code == 409:
                raise RepoNameTaken(
                    f"a repository named {name!r} already exists in the org {org!r} (names are "
                    "unique per org); choose another name"
                ) from exc
            raise
        branch = repo.default_branch or DEFAULT_BRANCH
        team = self.config.operator_team
        try:
            async with api.guard(f"giving {username} write access to {org}/{name}"):
                await api.repos.repo_add_collaborator(org, name, username, permission="write")
            async with api.guard(f"protecting {branch} of {org}/{name}"):
                await api.repos.repo_create_branch_protection(
                    org,
                    name,
                    branch_name=branch,
                    rule_name=branch,
                    # Nobody pushes to the default branch directly; changes arrive as pull
                    # requests that only the operator team can approve and merge.
                    enable_push=False,
                    required_approvals=1,
                    enable_approvals_whitelist=True,
                    approvals_whitelist_teams=[team],
                    enable_merge_whitelist=True,
                    merge_whitelist_teams=[team],
                    block_on_rejected_reviews=True,
                    dismiss_stale_approvals=True,
                )
        except Exception:
            try:
                async with api.guard(f"deleting the half-made {org}/{name}"):
                    await api.repos.repo_delete(org, name)
            except ForgeError as cleanup:
                log.error("could not delete half-made %s/%s: %s", org, name, cleanup.message)
            raise
        if not repo.clone_url or not repo.html_url or not repo.full_name:
            raise ForgeError(f"the forge at {self.config.url} created {org}/{name} without URLs")
        return RepoCreated(
            full_name=repo.full_name,
            clone_url=repo.clone_url,
            web_url=repo.html_url,
            default_branch=branch,
            private=private,
        )

    async def repos_of(self, agent: str) -> list[str]:
        """The org's repositories ``agent``'s user can push to (for the operator's view)."""
        org, username, api = self.config.org, self.config.username(agent), self.admin
        async with api.guard(f"listing {org}'s repositories", missing=f"no org {org!r}"):
            repos = await api.orgs.org_list_repos(org, limit=50)
        out: list[str] = []
        for repo in repos:
            if not repo.name or not repo.full_name:
                continue
            try:
                async with api.guard(f"checking {username} on {repo.full_name}", missing="no"):
                    await api.repos.repo_check_collaborator(org, repo.name, username)
            except NotFound:
                continue
            out.append(repo.full_name)
        return out


async def revoke_agent(config: ForgeConfig | None, agent: str) -> str | None:
    """Revoke ``agent``'s token, disable its user (destroy, or the forge group taken away).

    Never raises: a forge that is down must not keep an agent from being
    destroyed or reconfigured; what went wrong is returned for the log, with
    what to do by hand.
    """
    if config is None:
        return None
    try:
        forge = Forge.from_config(config)
    except HiveError as exc:
        return exc.message
    try:
        await forge.revoke(agent)
    except HiveError as exc:
        return (
            f"{exc.message}; disable forge user {config.username(agent)} and delete its "
            f"{TOKEN_NAME!r} token by hand"
        )
    finally:
        await forge.aclose()
    return None
