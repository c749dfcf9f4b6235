"""Secrets systemd hands a service with ``LoadCredential=`` are accepted, and only those.

systemd writes them into the unit's ``$CREDENTIALS_DIRECTORY`` as root's files, mode
0400 plus an ACL entry for the service's user (so the mode reads 0440): readable by
that user alone, yet failing the "mine and 0600" rule that every other secret file
must meet. Made here as systemd makes them (a 0440 file of another owner, the
variable set) and as an operator's careless copy of the same file elsewhere.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from hyperhive.errors import ConfigError
from hyperhive.netlink.dialer import read_credential
from hyperhive.secretfile import read_secret_file
from hyperhive.store.url import read_url_file

URL = "postgresql://hive:pw@db.example:5432/hive"

READERS: dict[str, tuple[str, Callable[[Path], str]]] = {
    "store_url_file": (URL, read_url_file),
    "host credential": ("hhc1_" + "x" * 43, lambda p: read_credential(p)),
    "forge token": ("token", lambda p: read_secret_file(p, "[forge] admin_token_file", "a token")),
}


def systemd_style(directory: Path, text: str) -> Path:
    """A credential as systemd 252 leaves it: another user's file (here: nobody's), 0440."""
    directory.mkdir(mode=0o500, exist_ok=True)
    path = directory / "secret"
    directory.chmod(0o700)
    path.write_text(text + "\n")
    path.chmod(0o440)
    os.chown(path, 65534, -1)
    directory.chmod(0o500)
    return path


@pytest.mark.parametrize("reader", READERS)
def test_a_loadcredential_file_is_read_and_the_same_file_elsewhere_is_refused(
    reader: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a file of another owner needs root")
    text, read = READERS[reader]
    credentials = tmp_path / "credentials"
    path = systemd_style(credentials, text)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(credentials))
    assert read(path) == text
    # The same file outside the unit's credentials directory is refused, as before.
    elsewhere = systemd_style(tmp_path / "copy", text)
    with pytest.raises(ConfigError):
        read(elsewhere)
    # And without the variable (a process systemd did not start) the directory is nothing.
    monkeypatch.delenv("CREDENTIALS_DIRECTORY")
    with pytest.raises(ConfigError):
        read(path)
