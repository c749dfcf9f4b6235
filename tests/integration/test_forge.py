"""The forge service, identity and notification poller against the scripted Forgejo."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from hyperhive.config import load_hive_config
from hyperhive.errors import ConfigError
from hyperhive.forge.agent import AgentForge
from hyperhive.forge.config import ForgeConfig, read_admin_token
from hyperhive.forge.errors import (
    ForgeNotConfigured,
    ForgeTokenRejected,
    ForgeUnreachable,
    InvalidRepoName,
    RepoNameTaken,
)
from hyperhive.forge.identity import TOKEN_FILE, read_token
from hyperhive.forge.notify import LEDGER_FILE, NotificationPoller
from hyperhive.forge.service import TOKEN_NAME, Forge
from hyperhive.forge.tool import CreateRepoArgs, create_repo
from tests.support.forgejo_server import FakeForgejo

pytestmark = pytest.mark.anyio


@pytest.fixture
def forgejo() -> Iterator[FakeForgejo]:
    with FakeForgejo() as server:
        server.add_org("agents")
        yield server
        # Everything the hive sent was a request the API contract allows.
        assert server.rejected == []


def _config(server_url: str, tmp_path: Path, token: str, **extra: object) -> ForgeConfig:
    token_file = tmp_path / "forge-admin-token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    return ForgeConfig(url=server_url, admin_token_file=token_file, **extra)  # type: ignore[arg-type]


@pytest.fixture
async def forge(forgejo: FakeForgejo, tmp_path: Path) -> AsyncIterator[Forge]:
    f = Forge.from_config(_config(forgejo.url, tmp_path, forgejo.admin_token))
    yield f
    await f.aclose()


def _agent_forge(forge: Forge, tmp_path: Path, agent: str) -> AgentForge:
    state = tmp_path / agent / "state"
    state.mkdir(parents=True)
    return AgentForge(forge, agent, state, owner=None)


# ---- config --------------------------------------------------------------------------


def test_hive_toml_forge_section(tmp_path: Path) -> None:
    (tmp_path / "hive.toml").write_text(
        '[forge]\nurl = "https://git.example/"\nadmin_token_file = "/etc/hive/forge-token"\n'
    )
    config = load_hive_config(tmp_path, env={})
    assert config.forge is not None
    assert config.forge.url == "https://git.example"
    assert config.forge.org == "agents"
    assert config.forge.api_url == "https://git.example/api/v1"


def test_hive_toml_forge_url_must_be_http(tmp_path: Path) -> None:
    (tmp_path / "hive.toml").write_text('[forge]\nurl = "git.example"\nadmin_token_file = "/x"\n')
    with pytest.raises(ConfigError, match=r"forge\.url.*http"):
        load_hive_config(tmp_path, env={})


def test_admin_token_file_readable_by_others_is_refused_with_the_fix(tmp_path: Path) -> None:
    config = _config("http://127.0.0.1:1", tmp_path, "secret")
    assert config.admin_token_file is not None
    config.admin_token_file.chmod(0o644)
    with pytest.raises(ConfigError, match=r"mode 0o644.*chmod 600"):
        read_admin_token(config)
    config.admin_token_file.chmod(0o600)
    assert read_admin_token(config) == "secret"


def test_missing_or_empty_admin_token_file_is_refused(tmp_path: Path) -> None:
    config = _config("http://127.0.0.1:1", tmp_path, "")
    assert config.admin_token_file is not None
    with pytest.raises(ConfigError, match="empty"):
        read_admin_token(config)
    config.admin_token_file.unlink()
    with pytest.raises(ConfigError, match="cannot be read"):
        read_admin_token(config)


def test_an_agent_hosts_forge_section_needs_no_admin_token(tmp_path: Path) -> None:
    """Issue #14: a host's hive.toml names the forge's URL only; the coordinator, which
    administers the forge, refuses to without the token file and says so."""
    (tmp_path / "hive.toml").write_text('[forge]\nurl = "https://git.example/"\n')
    config = load_hive_config(tmp_path, env={})
    assert config.forge is not None and config.forge.admin_token_file is None
    with pytest.raises(ConfigError, match="admin_token_file is not set in the coordinator"):
        read_admin_token(config.forge)
    with pytest.raises(ConfigError, match="admin_token_file is not set"):
        Forge.from_config(config.forge)


# ---- the scripted server's own contract ----------------------------------------------


async def test_scripted_forge_rejects_a_malformed_request(forgejo: FakeForgejo) -> None:
    headers = {"Authorization": f"token {forgejo.admin_token}"}
    async with httpx.AsyncClient(base_url=forgejo.url) as http:
        # username of the wrong type, email missing, a field the API does not have
        bad = await http.post(
            "/api/v1/admin/users", json={"username": ["x"], "bogus": 1}, headers=headers
        )
        unknown_query = await http.get("/api/v1/notifications?colour=red", headers=headers)
        no_route = await http.get("/api/v1/no/such/route", headers=headers)
        good = await http.post(
            "/api/v1/admin/users",
            json={"username": "ok", "email": "ok@example.invalid", "password": "pw123456"},
            headers=headers,
        )
    assert bad.status_code == 422
    for field in ("username", "email", "bogus"):
        assert field in bad.json()["message"]
    assert unknown_query.status_code == 422 and "colour" in unknown_query.json()["message"]
    assert no_route.status_code == 404
    assert good.status_code == 201 and good.json()["login"] == "ok"
    assert "bogus" not in [u for u in forgejo.users]
    assert len(forgejo.rejected) == 3
    forgejo.rejected.clear()  # expected here; the fixture checks every other test sent none


# ---- identities ----------------------------------------------------------------------


async def test_provision_creates_user_and_a_token_that_works(
    forge: Forge, forgejo: FakeForgejo, tmp_path: Path
) -> None:
    agent = _agent_forge(forge, tmp_path, "fg-alice")
    token = await agent.token()
    assert read_token(agent.state_dir) == token
    assert (os.stat(agent.state_dir / TOKEN_FILE).st_mode & 0o777) == 0o600
    alice = forgejo.users["fg-alice"]
    assert not alice.admin
    # create_repo is its only way to a repository: no personal repos, no orgs of its own
    assert alice.max_repo_creation == 0 and not alice.allow_create_organization
    async with forge.as_agent(token) as api:
        me = await api.users.get_current()
    assert me.login == "fg-alice"
    # a second call reuses the stored token: no second user, no second token
    assert await agent.token() == token
    assert [t.name for t in forgejo.tokens_of("fg-alice")] == [TOKEN_NAME]


async def test_reprovision_after_state_loss_replaces_the_token(
    forge: Forge, forgejo: FakeForgejo, tmp_path: Path
) -> None:
    agent = _agent_forge(forge, tmp_path, "fg-bob")
    first = await agent.token()
    (agent.state_dir / TOKEN_FILE).unlink()
    second = await agent.token()
    assert second != first
    assert [t.sha1 for t in forgejo.tokens_of("fg-bob")] == [second]


async def test_a_forge_user_the_hive_did_not_create_is_never_taken_over(
    forge: Forge, forgejo: FakeForgejo, tmp_path: Path
) -> None:
    person = forgejo.add_user("fg-carol", password="her-own-password")
    agent = _agent_forge(forge, tmp_path, "fg-carol")
    with pytest.raises(Exception, match="user_prefix"):
        await agent.token()
    assert person.password == "her-own-password"
    assert forgejo.tokens_of("fg-carol") == []


async def test_revoke_deletes_the_token_and_disables_the_user(
    forge: Forge, forgejo: FakeForgejo, tmp_path: Path
) -> None:
    agent = _agent_forge(forge, tmp_path, "fg-dave")
    token = await agent.token()
    assert await forge.revoke("fg-dave") is True
    assert forgejo.tokens_of("fg-dave") == []
    assert forgejo.users["fg-dave"].prohibit_login
    async with forge.as_agent(token) as api:
        with pytest.raises(ForgeTokenRejected, match="rejected the agent's token"):
            async with api.guard("checking who I am"):
                await api.users.get_current()
    assert await forge.revoke("fg-never-provisioned") is False


# ---- create_repo -----------------------------------------------------------------------


async def test_create_repo_gives_write_and_protects_the_default_branch(
    forge: Forge, forgejo: FakeForgejo, tmp_path: Path
) -> None:
    agent = _agent_forge(forge, tmp_path, "fg-erin")
    repo = await agent.create_repo("widget", "a widget", private=True)
    assert repo.full_name == "agents/widget"
    assert repo.clone_url == f"{forgejo.url}/agents/widget.git"
    assert repo.web_url == f"{forgejo.url}/agents/widget"
    stored = forgejo.repos["agents/widget"]
    assert stored.private and stored.description == "a widget"
    assert stored.collaborators == {"fg-erin": "write"}
    [rule] = stored.protections
    assert rule["rule_name"] == "main" and rule["enable_push"] is False
    assert rule["approvals_whitelist_teams"] == ["Owners"]
    assert rule["merge_whitelist_teams"] == ["Owners"]
    assert rule["required_approvals"] == 1
    assert "main" in forgejo.branches("agents/widget")
    assert await forge.repos_of("fg-erin") == ["agents/widget"]


async def test_create_repo_refusals_name_the_rule(
    forge: Forge, forgejo: FakeForgejo, tmp_path: Path
) -> None:
    agent = _agent_forge(forge, tmp_path, "fg-frank")
    await agent.create_repo("taken", "", private=False)
    with pytest.raises(RepoNameTaken, match="already exists in the org 'agents'"):
        await agent.create_repo("taken", "", private=False)
    before = len(forgejo.recorded)
    for bad, rule in [
        ("has space", "ASCII letters"),
        ("x" * 101, "1 to 100"),
        ("..", "reserved"),
        ("tool.git", "may not end in '.git'"),
    ]:
        with pytest.raises(InvalidRepoName, match=rule):
            await agent.create_repo(bad, "", private=False)
    assert len(forgejo.recorded) == before  # refused before asking the forge


async def test_create_repo_into_a_missing_org_says_which(
    forgejo: FakeForgejo, tmp_path: Path
) -> None:
    f = Forge.from_config(_config(forgejo.url, tmp_path, forgejo.admin_token, org="nope"))
    try:
        agent = _agent_forge(f, tmp_path, "fg-gina")
        with pytest.raises(Exception, match="org 'nope' does not exist"):
            await agent.create_repo("r", "", private=False)
    finally:
        await f.aclose()


async def test_half_made_repo_is_deleted_when_protection_fails(
    forgejo: FakeForgejo, tmp_path: Path
) -> None:
    # No such team: the forge refuses the protection, so the repository must not stay.
    f = Forge.from_config(
        _config(forgejo.url, tmp_path, forgejo.admin_token, operator_team="ghosts")
    )
    try:
        agent = _agent_forge(f, tmp_path, "fg-hank")
        with pytest.raises(Exception, match="ghosts"):
            await agent.create_repo("unprotected", "", private=False)
        assert "agents/unprotected" not in forgejo.repos
    finally:
        await f.aclose()


async def test_create_repo_with_a_rejected_admin_token(
    forgejo: FakeForgejo, tmp_path: Path
) -> None:
    f = Forge.from_config(_config(forgejo.url, tmp_path, "not-a-token"))
    try:
        agent = _agent_forge(f, tmp_path, "fg-ivy")
        with pytest.raises(ForgeTokenRejected, match="rejected the admin token.*admin_token_file"):
            await agent.create_repo("r", "", private=False)
    finally:
        await f.aclose()


async def test_create_repo_with_the_forge_unreachable_names_the_url(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    url = f"http://127.0.0.1:{port}"
    f = Forge.from_config(_config(url, tmp_path, "whatever"))
    try:
        agent = _agent_forge(f, tmp_path, "fg-jay")
        with pytest.raises(ForgeUnreachable, match=f"forge at {url} is unreachable"):
            await agent.create_repo("r", "", private=False)
    finally:
        await f.aclose()


class _Caller:
    def __init__(self, forge: AgentForge | None, problem: str | None = None) -> None:
        self.name = "fg-kim"
        self.forge = forge
        self.forge_problem = problem


async def test_create_repo_tool_without_a_forge_says_how_to_configure_one() -> None:
    with pytest.raises(ForgeNotConfigured, match=r"\[forge\] url and admin_token_file"):
        await create_repo(_Caller(None), CreateRepoArgs(name="r"))
    with pytest.raises(ForgeNotConfigured, match="mode 0o644"):
        await create_repo(
            _Caller(None, "admin_token_file x is mode 0o644"), CreateRepoArgs(name="r")
        )


async def test_create_repo_tool_answers_with_both_urls(
    forge: Forge, forgejo: FakeForgejo, tmp_path: Path
) -> None:
    text = await create_repo(
        _Caller(_agent_forge(forge, tmp_path, "fg-kim")), CreateRepoArgs(name="gadget")
    )
    assert f"clone: {forgejo.url}/agents/gadget.git" in text
    assert f"web: {forgejo.url}/agents/gadget" in text


# ---- notifications ---------------------------------------------------------------------


async def test_each_notification_is_delivered_once_and_marked_read(
    forge: Forge, forgejo: FakeForgejo, tmp_path: Path
) -> None:
    agent = _agent_forge(forge, tmp_path, "fg-lou")
    await agent.create_repo("app", "", private=False)
    first = forgejo.notify("fg-lou", "agents/app", "Review: please rename foo")
    delivered: list[str] = []

    async def deliver(body: str, key: str) -> None:
        delivered.append(body)

    poller = NotificationPoller(agent, deliver, interval=60, backoff_max=1)
    assert await poller.poll_once() == 1
    assert await poller.poll_once() == 0
    assert forgejo.unread("fg-lou") == []
    assert "Review: please rename foo" in delivered[0]
    assert f"{forgejo.url}/agents/app/pulls/1#issuecomment-1" in delivered[0]
    assert delivered[0].startswith("forge: pull in agents/app")

    # A host restart between delivery and mark-read: the thread is unread again on the
    # forge, but the ledger in the agent's state says it was delivered.
    forgejo.threads[0].unread = True
    restarted = NotificationPoller(agent, deliver, interval=60, backoff_max=1)
    assert await restarted.poll_once() == 0
    assert forgejo.unread("fg-lou") == [] and len(delivered) == 1
    assert (agent.state_dir / LEDGER_FILE).exists()

    second = forgejo.notify("fg-lou", "agents/app", "Comment: LGTM with nits")
    assert await restarted.poll_once() == 1
    assert len(delivered) == 2 and first != second


async def test_a_failed_delivery_is_retried_not_lost(
    forge: Forge, forgejo: FakeForgejo, tmp_path: Path
) -> None:
    agent = _agent_forge(forge, tmp_path, "fg-max")
    await agent.token()
    forgejo.notify("fg-max", "agents/none", "mentioned you")
    attempts: list[str] = []

    async def flaky(body: str, key: str) -> None:
        attempts.append(body)
        if len(attempts) == 1:
            raise ForgeUnreachable("coordinator socket gone")

    poller = NotificationPoller(agent, flaky, interval=60, backoff_max=1)
    with pytest.raises(ForgeUnreachable):
        await poller.poll_once()
    assert forgejo.unread("fg-max") != []  # not marked read: it was not delivered
    assert await poller.poll_once() == 1
    assert forgejo.unread("fg-max") == [] and len(attempts) == 2


# ---- git over HTTP with the credential helper --------------------------------------------


def test_git_push_through_the_credential_helper(forgejo: FakeForgejo, tmp_path: Path) -> None:
    """The helper from GIT_CONFIG_* answers git's prompt from the token file; no token in argv."""
    import asyncio

    async def setup() -> tuple[str, Path, dict[str, str]]:
        f = Forge.from_config(_config(forgejo.url, tmp_path, forgejo.admin_token))
        try:
            agent = _agent_forge(f, tmp_path, "fg-nia")
            repo = await agent.create_repo("pushy", "", private=True)
        finally:
            await f.aclose()
        from hyperhive.forge.identity import forge_env, git_credential_config

        env = {**forge_env(f.config, "fg-nia"), "HYPERHIVE_STATE_DIR": str(agent.state_dir)}
        git = git_credential_config(f.config)
        env["GIT_CONFIG_COUNT"] = str(len(git))
        for i, (k, v) in enumerate(git):
            env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = k, v
        return repo.clone_url, agent.state_dir, env

    clone_url, state, forge_env_vars = asyncio.run(setup())
    work = tmp_path / "work"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": "n",
        "GIT_AUTHOR_EMAIL": "n@x",
        "GIT_COMMITTER_NAME": "n",
        "GIT_COMMITTER_EMAIL": "n@x",
        **forge_env_vars,
    }

    def git(*args: str, cwd: Path = tmp_path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)

    cloned = git("clone", clone_url, str(work))
    assert cloned.returncode == 0, cloned.stderr
    (work / "f.txt").write_text("hi\n")
    assert git("checkout", "-b", "feature", cwd=work).returncode == 0
    assert git("add", "f.txt", cwd=work).returncode == 0
    assert git("commit", "-m", "add f", cwd=work).returncode == 0
    pushed = git("push", "origin", "feature", cwd=work)
    assert pushed.returncode == 0, pushed.stderr
    assert "feature" in forgejo.branches("agents/pushy")
    # the protected default branch refuses a direct push
    to_main = git("push", "origin", "feature:main", cwd=work)
    assert to_main.returncode != 0 and "protected" in to_main.stderr
    token = read_token(state)
    assert token is not None
    assert token not in (work / ".git" / "config").read_text()
    # without the helper there is no way in: the token is the only credential
    env.pop("GIT_CONFIG_COUNT")
    denied = git("ls-remote", clone_url)
    assert denied.returncode != 0


# ---- destroy -------------------------------------------------------------------------


async def test_destroying_an_agent_revokes_its_token_and_disables_its_user(
    forgejo: FakeForgejo, tmp_path: Path
) -> None:
    from hyperhive.config import AgentConfig
    from hyperhive.permissions import ToolGroup
    from tests.support.hive import coordinator, op_call, operator, seed_home

    home = tmp_path / "home"
    config = _config(forgejo.url, tmp_path, forgejo.admin_token)
    forge_groups = [*ToolGroup.AGENT_DEFAULT, ToolGroup.FORGE]
    seed_home(
        home,
        {"fg-queen": AgentConfig(), "fg-olga": AgentConfig(tool_groups=forge_groups)},
        {"fg-queen": None, "fg-olga": "fg-queen"},
        hive_toml=f'root_agent = "fg-queen"\n[forge]\nurl = "{forgejo.url}"\n'
        f'admin_token_file = "{config.admin_token_file}"\n',
    )
    f = Forge.from_config(config)
    try:
        token = await _agent_forge(f, tmp_path, "fg-olga").token()
    finally:
        await f.aclose()
    async with coordinator(home) as c, operator(c.paths) as op:
        done = await op_call(op, "agent_destroy", agent="fg-olga")
    assert isinstance(done, dict) and done["destroyed"]
    assert forgejo.tokens_of("fg-olga") == []
    assert forgejo.users["fg-olga"].prohibit_login and not forgejo.users["fg-olga"].active
    assert token not in forgejo.tokens


async def test_taking_the_forge_group_away_revokes_the_identity(
    forgejo: FakeForgejo, tmp_path: Path
) -> None:
    from hyperhive.config import AgentConfig
    from hyperhive.permissions import ToolGroup
    from tests.support.hive import coordinator, seed_home

    home = tmp_path / "home"
    config = _config(forgejo.url, tmp_path, forgejo.admin_token)
    seed_home(
        home,
        {
            "fg-queen": AgentConfig(),
            "fg-pia": AgentConfig(tool_groups=[*ToolGroup.AGENT_DEFAULT, ToolGroup.FORGE]),
        },
        {"fg-queen": None, "fg-pia": "fg-queen"},
        hive_toml=f'root_agent = "fg-queen"\n[forge]\nurl = "{forgejo.url}"\n'
        f'admin_token_file = "{config.admin_token_file}"\n',
    )
    f = Forge.from_config(config)
    try:
        token = await _agent_forge(f, tmp_path, "fg-pia").token()
    finally:
        await f.aclose()
    async with coordinator(home) as c:
        assert token in forgejo.tokens
        # The applied change made directly: a `perms set` proposal is committed by the
        # agent's host (#14), and none runs here.
        groups = list(ToolGroup.AGENT_DEFAULT)
        await c.lifecycle.apply("fg-pia", AgentConfig(tool_groups=groups), "apply fg-pia")
    assert token not in forgejo.tokens and forgejo.tokens_of("fg-pia") == []
    assert forgejo.users["fg-pia"].prohibit_login and not forgejo.users["fg-pia"].active


async def test_a_token_revoked_on_the_forge_is_reissued_by_the_poller(
    forge: Forge, forgejo: FakeForgejo, tmp_path: Path
) -> None:
    agent = _agent_forge(forge, tmp_path, "fg-pia")
    old = await agent.token()
    del forgejo.tokens[old]  # the operator revoked it in the forge's UI
    forgejo.notify("fg-pia", "agents/x", "ping")
    delivered: list[str] = []

    async def deliver(body: str, key: str) -> None:
        delivered.append(body)

    poller = NotificationPoller(agent, deliver, interval=60, backoff_max=1)
    with pytest.raises(ForgeTokenRejected, match="issues it a new one"):
        await poller.poll_once()
    new = read_token(agent.state_dir)
    assert new is not None and new != old and new in forgejo.tokens
    assert await poller.poll_once() == 1 and len(delivered) == 1
