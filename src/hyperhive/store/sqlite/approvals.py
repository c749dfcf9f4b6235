"""Approvals on SQLite."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from hyperhive.errors import Conflict, NotFound
from hyperhive.store.base import ApprovalRepo
from hyperhive.store.rows import ApprovalRow, ApprovalState
from hyperhive.store.sqlite import rowmap
from hyperhive.store.sqlite.engine import Engine, Tx

__all__ = ["SqliteApprovals"]


class SqliteApprovals(ApprovalRepo):
    def __init__(self, engine: Engine) -> None:
        self._db = engine

    async def create(
        self, kind: str, requester: str, subject: str, payload: Mapping[str, Any]
    ) -> int:
        text = json.dumps(dict(payload))
        return await self._db.run(
            lambda tx: tx.insert(
                "INSERT INTO approvals(kind, requester, subject, payload, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (kind, requester, subject, text, time.time()),
            )
        )

    async def get(self, approval_id: int) -> ApprovalRow | None:
        row = await self._db.run(
            lambda tx: tx.one("SELECT * FROM approvals WHERE id = ?", (approval_id,)),
            durable=False,
        )
        return None if row is None else rowmap.approval(row)

    async def list(self, pending_only: bool = True) -> list[ApprovalRow]:
        where = "WHERE state = 'pending'" if pending_only else ""
        rows = await self._db.run(
            lambda tx: tx.all(f"SELECT * FROM approvals {where} ORDER BY id"), durable=False
        )
        return [rowmap.approval(r) for r in rows]

    async def pending_for(self, kind: str, subject: str) -> int | None:
        row = await self._db.run(
            lambda tx: tx.one(
                "SELECT id FROM approvals WHERE kind = ? AND subject = ? AND state = 'pending' "
                "ORDER BY id LIMIT 1",
                (kind, subject),
            ),
            durable=False,
        )
        return None if row is None else int(row[0])

    async def resolve(self, approval_id: int, state: ApprovalState, resolution: str) -> ApprovalRow:
        def op(tx: Tx) -> ApprovalRow:
            row = tx.one("SELECT state FROM approvals WHERE id = ?", (approval_id,))
            if row is None:
                raise NotFound(f"no approval #{approval_id}; `hivectl approvals list` shows them")
            if row["state"] != "pending":
                raise Conflict(f"approval #{approval_id} is already {row['state']}")
            updated = tx.one(
                "UPDATE approvals SET state = ?, resolved_at = ?, resolution = ? WHERE id = ? "
                "RETURNING *",
                (state, time.time(), resolution, approval_id),
            )
            assert updated is not None
            return rowmap.approval(updated)

        return await self._db.run(op)
