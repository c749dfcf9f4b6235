"""Secrets the hive reads from files of their own: private to the hive's owner, or refused.

A token or shared secret in a file anyone on the machine can read would hand
it to every agent (agents run as other users on the same machine), so a
looser mode is refused with the command that fixes it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from hyperhive.errors import ConfigError

__all__ = ["read_secret_file"]


def read_secret_file(path: Path, setting: str, what: str) -> str:
    """The stripped contents of ``path``; refused unless a non-empty regular file, 0600-ish,
    owned by the hive's user. ``setting`` names it in errors (``[forge] admin_token_file``),
    ``what`` says what belongs in it.
    """
    try:
        st = path.stat()
    except OSError as exc:
        raise ConfigError(
            f"{setting} {path} cannot be read ({exc.strerror or exc}); "
            f"create it with {what}, mode 0600"
        ) from exc
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{setting} {path} is not a regular file")
    if st.st_mode & 0o077:
        raise ConfigError(
            f"{setting} {path} is mode {oct(st.st_mode & 0o777)}, readable by "
            f"others than its owner; fix it with: chmod 600 {path}"
        )
    if st.st_uid != os.geteuid():
        raise ConfigError(
            f"{setting} {path} belongs to uid {st.st_uid}, not to the hive's "
            f"user (uid {os.geteuid()}); fix it with: chown {os.geteuid()} {path}"
        )
    text = path.read_text(encoding="utf-8").strip()
    if not text:
        raise ConfigError(f"{setting} {path} is empty; put {what} in it")
    return text
