"""The hive's durable state behind one interface (``base.Store``), two backends.

``open_store`` picks the backend from a URL: ``postgresql://…`` (from
``store`` in hive.toml or ``HIVE_STORE_URL``) opens PostgreSQL; nothing set
means SQLite at ``<home>/hive.db``.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import urlsplit

from hyperhive.errors import ConfigError
from hyperhive.store.base import Store
from hyperhive.store.url import mask_url

__all__ = ["Store", "mask_url", "open_store"]

_PG_SCHEMES = ("postgresql", "postgres")


async def open_store(home: Path, url: str | None = None) -> Store:
    """Open (and migrate) the hive's store; refuse a bad URL or a newer schema.

    ``url`` is ``HiveConfig.store`` (hive.toml's ``store`` or ``HIVE_STORE_URL``).
    """
    if not url:
        from hyperhive.store.sqlite import SqliteStore

        return await SqliteStore.open(home / "hive.db")
    scheme = urlsplit(url).scheme
    if scheme in _PG_SCHEMES:
        # Imported by name: the PostgreSQL driver is only needed by hives that use it.
        backend = importlib.import_module("hyperhive.store.postgres")
        opener: Callable[[str], Awaitable[Store]] = backend.open_postgres
        return await opener(url)
    raise ConfigError(
        f"store URL {mask_url(url)!r} is not understood: use postgresql://user@host/db "
        "(or leave `store` unset for SQLite in the hive home)"
    )
