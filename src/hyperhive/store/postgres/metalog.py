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
    # One log writer at a time, so seq order is commit order: a mirror that
    # exports ``since(seq)`` can never skip an entry that committed late.
    await conn.execute("LOCK TABLE deploy_log IN EXCLUSIVE MODE")
    cur = await conn.execute(
        "INSERT INTO deploy_log(at, action, agent, message, config, topology) "
        f"VALUES (%s, %s, %s, %s, %s, %s) RETURNING {_LOG_COLS}",
        (now(), action, agent, message, config, topo),
    )
    row = await cur.fetchone()
    assert row is not None
    return _entry(row)


async def _apply(conn: Conn, agent: str, config: str, message: str, action: str) -> DeployEntry:
    entry = await _log(conn, action, agent, message, config=config)
    await conn.execute(
        "INSERT INTO applied_configs(agent, config, applied_at, seq) "
        "VALUES (%s, %s, %s, %s) ON CONFLICT (agent) DO UPDATE SET "
        "config = EXCLUDED.config, applied_at = EXCLUDED.applied_at, seq = EXCLUDED.seq",
        (agent, config, entry.at, entry.seq),
    )
    return entry


async def _set_tree(conn: Conn, tree: dict[str, str | None], note: str) -> DeployEntry:
    # Serialise whole-tree replacements: two at once must not interleave rows.
    await conn.execute("LOCK TABLE topology IN EXCLUSIVE MODE")
    await conn.execute("DELETE FROM topology")
    if tree:
        async with conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO topology(agent, parent) VALUES (%s, %s)", sorted(tree.items())
            )
    return await _log(conn, "topology", None, note, tree=tree)


class PgTopology(PgRepo, TopologyRepo):
    async def get(self) -> dict[str, str | None]:
        rows = await self._read("SELECT agent, parent FROM topology ORDER BY agent")
        return {str(a): (None if p is None else str(p)) for a, p in rows}

    async def set(self, tree: Mapping[str, str | None], note: str) -> DeployEntry:
        snapshot = dict(tree)
        return await self._tx(lambda conn: _set_tree(conn, snapshot, note))


class PgMetaLog(PgRepo, MetaLogRepo):
    async def apply_config(
        self, agent: str, config: str, message: str, action: str = "apply"
    ) -> DeployEntry:
        return await self._tx(lambda conn: _apply(conn, agent, config, message, action))

    async def remove_config(self, agent: str, message: str) -> DeployEntry:
        async def op(conn: Conn) -> DeployEntry:
            await conn.execute("DELETE FROM applied_configs WHERE agent = %s", (agent,))
            return await _log(conn, "remove", agent, message)

        return await self._tx(op)

    async def note(
        self, action: str, agent: str | None, message: str, *, text: str | None = None
    ) -> DeployEntry:
        return await self._tx(lambda conn: _log(conn, action, agent, message, config=text))

    async def adopt(
        self,
        configs: Mapping[str, str],
        tree: Mapping[str, str | None] | None,
        message: str,
    ) -> list[DeployEntry]:
        snapshot = dict(configs)
        topo = None if tree is None else dict(tree)

        async def op(conn: Conn) -> list[DeployEntry]:
            # Two coordinators adopting their homes at once: the second waits, then
            # sees the first's entries and adopts nothing.
            await conn.execute("LOCK TABLE deploy_log IN EXCLUSIVE MODE")
            cur = await conn.execute("SELECT 1 FROM deploy_log LIMIT 1")
            if await cur.fetchone() is not None:
                return []
            out = [
                await _apply(conn, agent, text, message, "import")
                for agent, text in sorted(snapshot.items())
            ]
            if topo is not None:
                out.append(await _set_tree(conn, topo, message))
            return out

        return await self._tx(op)

    async def since(self, after_seq: int, limit: int = 500) -> list[DeployEntry]:
        rows = await self._read(
            f"SELECT {_LOG_COLS} FROM deploy_log WHERE seq > %s ORDER BY seq LIMIT %s",
            (after_seq, max(0, limit)),
        )
        return [_entry(r) for r in rows]

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
