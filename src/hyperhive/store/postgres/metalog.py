"""The agent tree, applied configs and the deploy log on PostgreSQL.

They live in the database rather than on one coordinator's disk, so a
standby that takes over has them; the meta git repo becomes a mirror.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hyperhive.store.base import MetaLogRepo, TopologyRepo
from hyperhive.store.postgres._repo import Conn, PgRepo, now
from hyperhive.store.rows import DeployEntry

__all__ = ["PgMetaLog", "PgTopology"]

_LOG_COLS = "seq, at, action, agent, message, config, topology"


def _entry(r: tuple[Any, ...]) -> DeployEntry:
    tree = None if r[6] is None else json.loads(r[6])
    return DeployEntry(r[0], r[1], r[2], r[3], r[4], r[5], tree)


async def _log(
    conn: Conn,
    action: str,
    agent: str | None,
    message: str,
    config: str | None = None,
    tree: Mapping[str, str | None] | None = None,
) -> DeployEntry:
    topo = None if tree is None else json.dumps(dict(tree), sort_keys=True)
    cur = await conn.execute(
        "INSERT INTO deploy_log(at, action, agent, message, config, topology) "
        f"VALUES (%s, %s, %s, %s, %s, %s) RETURNING {_LOG_COLS}",
        (now(), action, agent, message, config, topo),
    )
    row = await cur.fetchone()
    assert row is not None
    return _entry(row)


class PgTopology(PgRepo, TopologyRepo):
    async def get(self) -> dict[str, str | None]:
        rows = await self._read("SELECT agent, parent FROM topology ORDER BY agent")
        return {str(a): (None if p is None else str(p)) for a, p in rows}

    async def set(self, tree: Mapping[str, str | None], note: str) -> DeployEntry:
        async def op(conn: Conn) -> DeployEntry:
            # Serialise whole-tree replacements: two at once must not interleave rows.
            await conn.execute("LOCK TABLE topology IN EXCLUSIVE MODE")
            await conn.execute("DELETE FROM topology")
            if tree:
                async with conn.cursor() as cur:
                    await cur.executemany(
                        "INSERT INTO topology(agent, parent) VALUES (%s, %s)", list(tree.items())
                    )
            return await _log(conn, "topology", None, note, tree=tree)

        return await self._tx(op)


class PgMetaLog(PgRepo, MetaLogRepo):
    async def apply_config(
        self, agent: str, config: str, message: str, action: str = "apply"
    ) -> DeployEntry:
        async def op(conn: Conn) -> DeployEntry:
            entry = await _log(conn, action, agent, message, config=config)
            await conn.execute(
                "INSERT INTO applied_configs(agent, config, applied_at, seq) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (agent) DO UPDATE SET "
                "config = EXCLUDED.config, applied_at = EXCLUDED.applied_at, seq = EXCLUDED.seq",
                (agent, config, entry.at, entry.seq),
            )
            return entry

        return await self._tx(op)

    async def remove_config(self, agent: str, message: str) -> DeployEntry:
        async def op(conn: Conn) -> DeployEntry:
            await conn.execute("DELETE FROM applied_configs WHERE agent = %s", (agent,))
            return await _log(conn, "remove", agent, message)

        return await self._tx(op)

    async def note(self, action: str, agent: str | None, message: str) -> DeployEntry:
        return await self._tx(lambda conn: _log(conn, action, agent, message))

    async def configs(self) -> dict[str, str]:
        rows = await self._read("SELECT agent, config FROM applied_configs ORDER BY agent")
        return {str(a): str(c) for a, c in rows}

    async def log(self, limit: int = 50, agent: str | None = None) -> list[DeployEntry]:
        if agent is None:
            rows = await self._read(
                f"SELECT {_LOG_COLS} FROM deploy_log ORDER BY seq DESC LIMIT %s", (max(0, limit),)
            )
        else:
            rows = await self._read(
                f"SELECT {_LOG_COLS} FROM deploy_log WHERE agent = %s ORDER BY seq DESC LIMIT %s",
                (agent, max(0, limit)),
            )
        return [_entry(r) for r in rows]
