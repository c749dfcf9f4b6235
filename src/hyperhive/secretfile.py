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

__all__ = ["read_secret_file", "systemd_credential"]

# Set by systemd for a service with LoadCredential=: the unit's own credentials directory.
CREDENTIALS_DIRECTORY_ENV = "CREDENTIALS_DIRECTORY"


def systemd_credential(path: Path) -> bool:
    """Whether ``path`` is a credential systemd handed this service (``LoadCredential=``).

    systemd makes those readable by the service's user alone, but as root's files with
    an ACL entry for that user, so their mode shows 0440 and their owner is root: the
    owner-and-mode checks below would refuse exactly the files meant for secrets. The
    directory comes from the service's environment, which its caller cannot set.
    """
    where = os.environ.get(CREDENTIALS_DIRECTORY_ENV)
    if not where:
        return False
    try:
        return path.resolve().parent == Path(where).resolve()
    except OSError:
        return False


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
    if systemd_credential(path):
        pass
    elif st.st_mode & 0o077:
        raise ConfigError(
            f"{setting} {path} is mode {oct(st.st_mode & 0o777)}, readable by "
            f"others than its owner; fix it with: chmod 600 {path}"
        )
    elif st.st_uid != os.geteuid():
        raise ConfigError(
            f"{setting} {path} belongs to uid {st.st_uid}, not to the hive's "
            f"user (uid {os.geteuid()}); fix it with: chown {os.geteuid()} {path}"
        )
    text = path.read_text(encoding="utf-8").strip()
    if not text:
        raise ConfigError(f"{setting} {path} is empty; put {what} in it")
    return text
