"""The store's URL: where it comes from, and how it is shown.

The URL carries the database password, so it lives in a file only the
coordinator can read (``store_url_file``, mode 0600) or in the coordinator's
environment (``HIVE_STORE_URL``), never in a world-readable ``hive.toml``.
Whatever is logged or put in an error passes through :func:`mask_url`.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from hyperhive.errors import ConfigError
from hyperhive.secretfile import systemd_credential

__all__ = ["has_password", "is_postgres_url", "mask_url", "read_url_file"]

_SCHEMES = ("postgresql://", "postgres://")
# user:password@ in a URL; password=… in a query string or a key=value conninfo.
_URL_PASSWORD = re.compile(r"(?P<head>://[^/?#@:]*):(?P<pw>[^@/?#]*)@")
_KV_PASSWORD = re.compile(r"(?P<head>(?:^|[?&\s])password\s*=\s*)(?P<pw>'(?:[^'\\]|\\.)*'|[^&\s]*)")


def is_postgres_url(url: str) -> bool:
    return url.strip().lower().startswith(_SCHEMES)


def has_password(url: str) -> bool:
    return mask_url(url) != url


def mask_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (safe to log and show)."""
    masked = _URL_PASSWORD.sub(lambda m: f"{m['head']}:***@", url)
    return _KV_PASSWORD.sub(lambda m: f"{m['head']}***", masked)


def read_url_file(path: Path) -> str:
    """The store URL from a file only its owner may read; refused otherwise.

    The file holds the database password, and agents run as other users on the
    same machine: a group- or world-readable file would hand them the broker.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise ConfigError("store_url_file does not exist", path=str(path)) from None
    except OSError as exc:
        raise ConfigError(
            f"store_url_file cannot be read ({exc.strerror})", path=str(path)
        ) from None
    with os.fdopen(fd, encoding="utf-8") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError("store_url_file is not a regular file", path=str(path))
        if systemd_credential(path):
            pass  # systemd made it this service's alone
        elif st.st_mode & 0o077:
            raise ConfigError(
                f"store_url_file is readable by others (mode {stat.S_IMODE(st.st_mode):04o}); "
                f"it holds the database password: chmod 600 {path}",
                path=str(path),
            )
        elif st.st_uid != os.geteuid():
            raise ConfigError(
                f"store_url_file belongs to uid {st.st_uid}, not to the coordinator's "
                f"uid {os.geteuid()}: chown it to the user that runs the coordinator",
                path=str(path),
            )
        lines = [
            ln.strip() for ln in f.read().splitlines() if ln.strip() and not ln.startswith("#")
        ]
    if len(lines) != 1 or not is_postgres_url(lines[0]):
        raise ConfigError(
            "store_url_file must hold one line: postgresql://user:password@host:port/dbname",
            path=str(path),
        )
    return lines[0]
