"""The hive's model credentials: what claude needs, given once by the operator.

claude takes either an API key (``ANTHROPIC_API_KEY``) or a Claude
subscription token (``CLAUDE_CODE_OAUTH_TOKEN``, printed by ``claude
setup-token``). Both pass through from the environment ``hivectl up`` runs
in. For a hive that is already running, ``hivectl login`` writes them to
``<home>/credentials`` (0600, the operator's own): the agent host reads that
file before every claude it starts, so no restart is needed, and an agent
held in ``needs login`` resumes as soon as the file changes.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from hyperhive.atomic import atomic_write_text
from hyperhive.config import HivePaths
from hyperhive.errors import InvalidRequest

__all__ = [
    "CREDENTIAL_KEYS",
    "LOGIN_REMEDY",
    "credentials_file",
    "effective_env",
    "fingerprint",
    "read_credentials",
    "write_credentials",
]

log = logging.getLogger(__name__)

CREDENTIAL_KEYS = ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN")
LOGIN_REMEDY = (
    "give the hive credentials: `hivectl login` (an API key, ANTHROPIC_API_KEY, or a Claude "
    "subscription token, CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token`); no restart needed"
)


def credentials_file(paths: HivePaths) -> Path:
    return paths.home / "credentials"


def read_credentials(paths: HivePaths) -> dict[str, str]:
    """``KEY=VALUE`` lines of the credentials file (absent: empty); unknown keys ignored."""
    path = credentials_file(paths)
    try:
        text = path.read_text()
        mode = path.stat().st_mode
    except FileNotFoundError:
        return {}
    except OSError as exc:
        log.warning("cannot read %s: %s", path, exc.strerror or exc)
        return {}
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("%s is readable by others (mode %o); chmod 600 it", path, mode & 0o777)
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key in CREDENTIAL_KEYS and value:
            out[key] = value
    return out


def write_credentials(paths: HivePaths, key: str, value: str) -> Path:
    """Set ``key`` (replacing any other credential: one way to log in at a time)."""
    if key not in CREDENTIAL_KEYS:
        raise InvalidRequest(
            f"{key!r} is not a credential; use one of {', '.join(CREDENTIAL_KEYS)}"
        )
    value = value.strip()
    if not value or any(c.isspace() for c in value):
        raise InvalidRequest(
            f"the {key} value is empty or contains whitespace; nothing was written"
        )
    path = credentials_file(paths)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, f"{key}={value}\n", 0o600)
    return path


def effective_env(
    paths: HivePaths, environ: Mapping[str, str], passthrough: list[str]
) -> dict[str, str]:
    """The passed-through variables, with the credentials file in charge of credentials.

    A key in the file replaces whatever credential the host's environment had
    (claude would otherwise prefer a stale ``ANTHROPIC_API_KEY`` over a fresh token).
    """
    env = {k: environ[k] for k in passthrough if k in environ}
    stored = read_credentials(paths)
    if stored:
        for key in CREDENTIAL_KEYS:
            env.pop(key, None)
        env.update(stored)
    return env


def fingerprint(paths: HivePaths, agent_home: Path) -> tuple[tuple[str, int, int, int], ...]:
    """What changes when the agent's credentials do: the hive's file, its own claude login."""
    out = []
    for path in (credentials_file(paths), agent_home / ".claude" / ".credentials.json"):
        try:
            st = os.stat(path)
            out.append((str(path), st.st_ino, st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((str(path), 0, 0, -1))
    return tuple(out)
