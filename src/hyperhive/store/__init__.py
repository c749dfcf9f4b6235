"""The hive's store: one interface, an embedded SQLite backend and a PostgreSQL one."""

from __future__ import annotations

__all__: list[str] = []
