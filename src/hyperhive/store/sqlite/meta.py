"""Topology, applied agent configs and the deploy log on SQLite."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping

from hyperhive.store.base import MetaLogRepo, TopologyRepo
from hyperhive.store.rows import DeployEntry
from hyperhive.store.sqlite.engine import Engine, Tx

__all__ = ["SqliteMetaLog", "SqliteTopology"]


def _entry(r: sqlite3.Row) -> DeployEntry:
    tree = None if r["topology"] is None else json.loads(r["topology"])
    return DeployEntry(
        seq=r["seq"],
        at=r["at"],
        action=r["action"],
        agent=r["agent"],
        message=r["message"],
        config=r["config"],
        topology=tree,
    )


def _log(
    tx: Tx,
    action: str,
    agent: str | None,
    message: str,
    config: str | None = None,
    tree: Mapping[str, str | None] | None = None,
) -> DeployEntry:
    row = tx.one(
        "INSERT INTO deploy_log(at, action, agent, message, config, topology) "
        "VALUES (?, ?, ?, ?, ?, ?) RETURNING *",
        (
            time.time(),
            action,
            agent,
            message,
            config,
            None if tree is None else json.dumps(dict(tree), sort_keys=True),
        ),
    )
    assert row is not None
    return _entry(row)


def _apply(tx: Tx, agent: str, config: str, message: str, action: str) -> DeployEntry:
    entry = _log(tx, action, agent, message, config=config)
    tx.execute(
        "INSERT INTO applied_configs(agent, config, applied_at, seq) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(agent) DO UPDATE SET config = excluded.config, "
        "applied_at = excluded.applied_at, seq = excluded.seq",
        (agent, config, entry.at, entry.seq),
    )
    return entry


def _set_tree(tx: Tx, tree: dict[str, str | None], note: str) -> DeployEntry:
    tx.execute("DELETE FROM topology")
    tx.conn.executemany("INSERT INTO topology(agent, parent) VALUES (?, ?)", sorted(tree.items()))
    return _log(tx, "topology", None, note, tree=tree)


class SqliteTopology(TopologyRepo):
    def __init__(self, engine: Engine) -> None:
        self._db = engine

    async def get(self) -> dict[str, str | None]:
        rows = await self._db.run(
            lambda tx: tx.all("SELECT agent, parent FROM topology ORDER BY agent"), durable=False
        )
        return {str(r[0]): r[1] for r in rows}

    async def set(self, tree: Mapping[str, str | None], note: str) -> DeployEntry:
        snapshot = dict(tree)
        return await self._db.run(lambda tx: _set_tree(tx, snapshot, note))


class SqliteMetaLog(MetaLogRepo):
    def __init__(self, engine: Engine) -> None:
        self._db = engine

    async def apply_config(
        self, agent: str, config: str, message: str, action: str = "apply"
    ) -> DeployEntry:
        return await self._db.run(lambda tx: _apply(tx, agent, config, message, action))

    async def remove_config(self, agent: str, message: str) -> DeployEntry:
        def op(tx: Tx) -> DeployEntry:
            tx.execute("DELETE FROM applied_configs WHERE agent = ?", (agent,))
            return _log(tx, "remove", agent, message)

        return await self._db.run(op)

    async def note(
        self, action: str, agent: str | None, message: str, *, text: str | None = None
    ) -> DeployEntry:
        return await self._db.run(lambda tx: _log(tx, action, agent, message, config=text))

    async def adopt(
        self,
        configs: Mapping[str, str],
        tree: Mapping[str, str | None] | None,
        message: str,
    ) -> list[DeployEntry]:
        snapshot = dict(configs)
        topo = None if tree is None else dict(tree)

        def op(tx: Tx) -> list[DeployEntry]:
            if tx.one("SELECT 1 FROM deploy_log LIMIT 1") is not None:
                return []
            out = [
                _apply(tx, agent, text, message, "import")
                for agent, text in sorted(snapshot.items())
            ]
            if topo is not None:
                out.append(_set_tree(tx, topo, message))
            return out

        return await self._db.run(op)

    async def since(self, after_seq: int, limit: int = 500) -> list[DeployEntry]:
        rows = await self._db.run(
            lambda tx: tx.all(
                "SELECT * FROM deploy_log WHERE seq > ? ORDER BY seq LIMIT ?",
                (after_seq, max(0, limit)),
            ),
            durable=False,
        )
        return [_entry(r) for r in rows]

    async def configs(self) -> dict[str, str]:
        rows = await self._db.run(
            lambda tx: tx.all("SELECT agent, config FROM applied_configs ORDER BY agent"),
            durable=False,
        )
        return {str(r[0]): str(r[1]) for r in rows}

    async def log(self, limit: int = 50, agent: str | None = None) -> list[DeployEntry]:
        where, args = ("WHERE agent = ?", (agent, limit)) if agent else ("", (limit,))
        rows = await self._db.run(
            lambda tx: tx.all(f"SELECT * FROM deploy_log {where} ORDER BY seq DESC LIMIT ?", args),
            durable=False,
        )
        return [_entry(r) for r in rows]
