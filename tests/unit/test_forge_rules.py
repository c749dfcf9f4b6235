"""Pure forge rules: repository names, the credential helper's config, notification text."""

from __future__ import annotations

import datetime as dt
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyforgejo.types.notification_subject import NotificationSubject
from pyforgejo.types.notification_thread import NotificationThread
from pyforgejo.types.repository import Repository

from hyperhive.forge.config import ForgeConfig
from hyperhive.forge.errors import InvalidRepoName
from hyperhive.forge.identity import TOKEN_FILE, forge_env, git_credential_config
from hyperhive.forge.notify import notification_key, render_notification
from hyperhive.forge.rules import validate_repo_name

FORGEJO_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")


@given(st.text(max_size=120))
def test_an_accepted_name_is_one_forgejo_accepts(name: str) -> None:
    try:
        validate_repo_name(name)
    except InvalidRepoName as exc:
        assert name in exc.message or repr(name) in exc.message
        return
    assert FORGEJO_NAME.fullmatch(name)
    assert name not in (".", "..", "-")
    assert not name.lower().endswith((".git", ".wiki", ".rss", ".atom"))


@given(st.from_regex(r"[a-z][a-z0-9_-]{0,98}[a-z0-9]", fullmatch=True))
def test_ordinary_names_are_accepted(name: str) -> None:
    assert validate_repo_name(name) == name


@pytest.mark.parametrize("name", ["", "a b", "ü", "a/b", "x" * 101, ".", "..", "-", "r.GIT"])
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidRepoName):
        validate_repo_name(name)


def _config(**extra: object) -> ForgeConfig:
    return ForgeConfig(url="https://git.example", admin_token_file=Path("/t"), **extra)  # type: ignore[arg-type]


def test_forge_env_never_carries_the_token() -> None:
    env = forge_env(_config(user_prefix="agent-"), "ann")
    assert env == {
        "HIVE_FORGE_URL": "https://git.example",
        "HIVE_FORGE_USER": "agent-ann",
        "HIVE_FORGE_ORG": "agents",
    }


def test_the_credential_helper_answers_get_from_the_token_file(tmp_path: Path) -> None:
    (tmp_path / TOKEN_FILE).write_text("s3cret\n")
    [(key, helper)] = git_credential_config(_config())
    assert key == "credential.https://git.example.helper"
    assert helper.startswith("!") and "s3cret" not in helper
    env = {"HIVE_FORGE_USER": "ann", "HYPERHIVE_STATE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    # git runs a "!" helper as: sh -c '<helper> "$@"' <helper> <action>
    script = helper[1:] + ' "$@"'
    get = subprocess.run(
        ["sh", "-c", script, "helper", "get"], env=env, capture_output=True, text=True
    )
    assert get.stdout == "username=ann\npassword=s3cret\n"
    store = subprocess.run(
        ["sh", "-c", script, "helper", "store"], env=env, capture_output=True, text=True
    )
    assert store.returncode == 0 and store.stdout == ""


def test_a_notification_renders_with_its_link_and_keys_on_its_update_time() -> None:
    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    thread = NotificationThread(
        id=7,
        updated_at=when,
        repository=Repository(full_name="agents/app"),
        subject=NotificationSubject(
            title="Fix the parser",
            type="Pull",
            state="open",
            html_url="https://git.example/agents/app/pulls/3",
            latest_comment_html_url="https://git.example/agents/app/pulls/3#issuecomment-9",
        ),
    )
    text = render_notification(thread)
    assert text == (
        "forge: pull in agents/app (open): Fix the parser\n"
        "https://git.example/agents/app/pulls/3#issuecomment-9"
    )
    later = thread.model_copy(update={"updated_at": when + dt.timedelta(minutes=1)})
    assert notification_key(thread) != notification_key(later)
    assert notification_key(thread) == notification_key(thread.model_copy())
