"""The forge scenario against a real Forgejo/Gitea (run by ``scripts/forge-check``)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio

from hyperhive.errors import HiveError, NotFound
from hyperhive.forge.agent import AgentForge
from hyperhive.forge.config import ForgeConfig
from hyperhive.forge.identity import forge_env, git_credential_config, read_token
from hyperhive.forge.service import Forge


def say(text: str) -> None:
    print(f"forge-check: {text}", flush=True)  # noqa: T201


def git_env(config: ForgeConfig, agent: str, state: Path, home: Path) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "GIT_TERMINAL_PROMPT": "0",
        "HYPERHIVE_STATE_DIR": str(state),
        "GIT_AUTHOR_NAME": agent,
        "GIT_AUTHOR_EMAIL": f"{agent}@hyperhive",
        "GIT_COMMITTER_NAME": agent,
        "GIT_COMMITTER_EMAIL": f"{agent}@hyperhive",
        **forge_env(config, agent),
    }
    entries = git_credential_config(config)
    env["GIT_CONFIG_COUNT"] = str(len(entries))
    for i, (key, value) in enumerate(entries):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    return env


def git(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)


async def scenario(config: ForgeConfig) -> None:
    suffix = secrets.token_hex(3)
    agent, name = f"hhcheck-{suffix}", f"hhcheck-{suffix}"
    forge = Forge.from_config(config)
    with tempfile.TemporaryDirectory(prefix="forge-check-") as tmp:
        state, work = Path(tmp, "state"), Path(tmp, "work")
        state.mkdir(mode=0o700)
        me = AgentForge(forge, agent, state, owner=None)
        try:
            await me.token()
            say(f"provisioned user {config.username(agent)}; token in {state}")
            repo = await me.create_repo(name, "hyperhive forge-check", private=True)
            say(f"created {repo.full_name}: {repo.clone_url}")
            env = git_env(config, agent, state, Path(tmp))
            steps = [
                ("clone", Path(tmp), ["clone", "-q", repo.clone_url, str(work)]),
                ("branch", work, ["checkout", "-q", "-b", "forge-check"]),
                ("commit", work, ["commit", "-q", "--allow-empty", "-m", "forge-check"]),
                ("push branch", work, ["push", "-q", "origin", "forge-check"]),
            ]
            for what, cwd, args in steps:
                done = git(env, cwd, *args)
                if done.returncode != 0:
                    raise SystemExit(f"forge-check: FAILED at {what}: {done.stderr.strip()}")
                say(f"{what}: ok")
            direct = git(env, work, "push", "-q", "origin", f"forge-check:{repo.default_branch}")
            if direct.returncode == 0:
                raise SystemExit(
                    f"forge-check: FAILED: a direct push to {repo.default_branch} was accepted"
                )
            say(f"direct push to {repo.default_branch} refused: ok")
            token = read_token(state)
            assert token is not None
            async with me.as_agent(token) as api, api.guard("listing notifications"):
                threads = await api.notifications.notify_get_list(status_types=["unread"])
            say(f"notifications as the agent: ok ({len(threads)} unread)")
        finally:
            try:
                async with forge.admin.guard(f"deleting {config.org}/{name}", missing="gone"):
                    await forge.admin.repos.repo_delete(config.org, name)
            except (NotFound, HiveError) as exc:
                say(f"cleanup: {exc.message}")
            revoked = await forge.revoke(agent)
            say(f"revoked token, disabled user: {'ok' if revoked else 'nothing to revoke'}")
            try:
                async with forge.admin.guard(f"deleting user {agent}", missing="gone"):
                    await forge.admin.admin.delete_user(config.username(agent), purge=True)
            except (NotFound, HiveError) as exc:
                say(f"cleanup: {exc.message}")
            await forge.aclose()
    say("PASSED")


def main() -> None:
    config = ForgeConfig(
        url=os.environ["HIVE_FORGE_TEST_URL"],
        admin_token_file=Path(os.environ["HIVE_FORGE_TEST_TOKEN_FILE"]),
        org=os.environ.get("HIVE_FORGE_TEST_ORG", "agents"),
    )
    try:
        anyio.run(scenario, config)
    except HiveError as exc:
        sys.exit(f"forge-check: FAILED: {exc.message}")


if __name__ == "__main__":
    main()
