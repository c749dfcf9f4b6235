"""The hive's credentials file: validated writes, and it outranks a stale environment."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from hyperhive.config import HivePaths, load_hive_config
from hyperhive.credentials import (
    credentials_file,
    effective_env,
    fingerprint,
    read_credentials,
    write_credentials,
)
from hyperhive.errors import InvalidRequest


def test_both_credentials_pass_through_by_default(tmp_path: Path) -> None:
    passthrough = load_hive_config(tmp_path, {}).env_passthrough
    assert {"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"} <= set(passthrough)


def test_a_written_token_replaces_the_environments_key(tmp_path: Path) -> None:
    paths = HivePaths(tmp_path)
    environ = {"ANTHROPIC_API_KEY": "stale", "ANTHROPIC_BASE_URL": "http://x", "OTHER": "no"}
    passthrough = ["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_BASE_URL"]
    assert effective_env(paths, environ, passthrough) == {
        "ANTHROPIC_API_KEY": "stale",
        "ANTHROPIC_BASE_URL": "http://x",
    }
    before = fingerprint(paths, tmp_path / "agent-home")
    path = write_credentials(paths, "CLAUDE_CODE_OAUTH_TOKEN", " tok-123\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert effective_env(paths, environ, passthrough) == {
        "CLAUDE_CODE_OAUTH_TOKEN": "tok-123",
        "ANTHROPIC_BASE_URL": "http://x",
    }
    assert fingerprint(paths, tmp_path / "agent-home") != before


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("PATH", "/evil", "is not a credential"),
        ("ANTHROPIC_API_KEY", "  \n", "empty"),
        ("ANTHROPIC_API_KEY", "two words", "whitespace"),
    ],
)
def test_bad_credentials_are_refused_and_lose_nothing(
    tmp_path: Path, key: str, value: str, problem: str
) -> None:
    paths = HivePaths(tmp_path)
    write_credentials(paths, "ANTHROPIC_API_KEY", "good")
    with pytest.raises(InvalidRequest, match=problem):
        write_credentials(paths, key, value)
    assert read_credentials(paths) == {"ANTHROPIC_API_KEY": "good"}


def test_unknown_lines_in_the_file_are_ignored(tmp_path: Path) -> None:
    paths = HivePaths(tmp_path)
    credentials_file(paths).write_text("# note\nLD_PRELOAD=/x\nANTHROPIC_API_KEY=k\n")
    assert read_credentials(paths) == {"ANTHROPIC_API_KEY": "k"}
