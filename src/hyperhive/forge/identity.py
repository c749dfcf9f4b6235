"""An agent's forge identity on disk, and the git credential helper that uses it.

The personal token lives in the agent's own state dir (``forge-token``, mode
0600, owned by the agent's system user): no other agent's sandbox binds that
dir, and the agent's user is the only one that can open it. Git inside the
sandbox gets it through a credential helper set by ``GIT_CONFIG_*``
environment entries: a shell function that reads the file and prints it on
git's stdin protocol, so the token never appears in an argv (``printf`` is a
shell builtin, ``cat`` only sees the path) nor in a remote URL or a log.
"""

from __future__ import annotations

import os
from pathlib import Path

from hyperhive.forge.config import ForgeConfig
from hyperhive.safefs import atomic_write_beneath, read_beneath

__all__ = [
    "TOKEN_FILE",
    "forge_env",
    "git_credential_config",
    "read_token",
    "write_token",
]

TOKEN_FILE = "forge-token"

# Run by git as: sh -c '<helper> "$@"' <helper> get|store|erase
_HELPER = (
    '!f() { test "$1" = get || return 0; '
    "printf 'username=%s\\n' \"$HIVE_FORGE_USER\"; "
    "printf 'password=%s\\n' \"$(cat \"$HYPERHIVE_STATE_DIR/" + TOKEN_FILE + '")"; }; f'
)


def git_credential_config(config: ForgeConfig) -> list[tuple[str, str]]:
    """``git config`` entries that answer the forge's credential prompt from the token file."""
    return [(f"credential.{config.url}.helper", _HELPER)]


def forge_env(config: ForgeConfig, agent: str) -> dict[str, str]:
    """What a sandboxed process is told about its forge (never the token itself)."""
    return {
        "HIVE_FORGE_URL": config.url,
        "HIVE_FORGE_USER": config.username(agent),
        "HIVE_FORGE_ORG": config.org,
    }


def write_token(state_dir: Path, token: str, owner: tuple[int, int] | None) -> None:
    """Store the token atomically, 0600, then hand it to the agent's user."""
    path = state_dir / TOKEN_FILE
    atomic_write_beneath(state_dir, path, token.encode() + b"\n", 0o600)
    if owner is not None:
        os.chown(path, *owner, follow_symlinks=False)


def read_token(state_dir: Path) -> str | None:
    """The stored token (None if there is none yet); never follows a planted link."""
    raw = read_beneath(state_dir, state_dir / TOKEN_FILE, 4096)
    token = raw.decode("utf-8", "replace").strip() if raw is not None else ""
    return token or None
