"""Approvals on PostgreSQL (semantics: ``base.ApprovalRepo``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hyperhive.errors import Conflict, NotFound
from hyperhive.store.base import ApprovalRepo
from hyperhive.store.postgres._repo import Conn, PgRepo, now
from hyperhive.store.postgres.loose_ends import APPROVAL_COLS, approval_row
from hyperhive.store.rows import ApprovalRow, ApprovalState

__all__ = ["PgApprovals"]


class PgApprovals(PgRepo, ApprovalRepo):
    async def create(
        self, kind: str, requester: str, subject: str, payload: Mapping[str, Any]
    ) -> int:
        async def op(conn: Conn) -> int:
            cur = await conn.execute(
                "INSERT INTO approvals(kind, requester, subject, payload, created_at) "
                "VALUES (%s, %s, %s, %s, %s) RETURNING id",
                (kind, requester, subject, json.dumps(dict(payload)), now()),
            )
            row = await cur.fetchone()
            assert row is not None
            return int(row[0])

        return await self._db.one(op)

    async def get(self, approval_id: int) -> ApprovalRow | None:
        rows = await self._read(
            f"SELECT {APPROVAL_COLS} FROM approvals WHERE id = %s", (approval_id,)
        )
        return approval_row(rows[0]) if rows else None

    async def list(self, pending_only: bool = True) -> list[ApprovalRow]:
        where = "WHERE state = 'pending' " if pending_only else ""
        rows = await self._read(f"SELECT {APPROVAL_COLS} FROM approvals {where}ORDER BY id")
        return [approval_row(r) for r in rows]

    async def pending_for(self, kind: str, subject: str) -> int | None:
        rows = await self._read(
            "SELECT id FROM approvals WHERE state = 'pending' AND kind = %s AND subject = %s "
            "ORDER BY id LIMIT 1",
            (kind, subject),
        )
        return int(rows[0][0]) if rows else None

    async def resolve(self, approval_id: int, state: ApprovalState, resolution: str) -> ApprovalRow:
        async def op(conn: Conn) -> ApprovalRow:
            cur = await conn.execute(
                f"SELECT {APPROVAL_COLS} FROM approvals WHERE id = %s FOR UPDATE", (approval_id,)
            )
            found = await cur.fetchone()
            if found is None:
                raise NotFound(f"no approval #{approval_id}; `hivectl approvals list` shows them")
            if found[5] != "pending":
                raise Conflict(f"approval #{approval_id} is already {found[5]}")
            cur = await conn.execute(
                "UPDATE approvals SET state = %s, resolved_at = %s, resolution = %s "
                f"WHERE id = %s RETURNING {APPROVAL_COLS}",
                (state, now(), resolution, approval_id),
            )
            row = await cur.fetchone()
            assert row is not None
            return approval_row(row)

        return await self._tx(op)
