"""Remote agent hosts: their credentials listed, added, rotated and revoked."""

from __future__ import annotations

from hyperhive.core.api.operator_api.base import OPERATOR_TABLE, OperatorApi
from hyperhive.protocol import (
    HostCredential,
    HostView,
    OpHostsAddReq,
    OpHostsListReq,
    OpHostsRevokeReq,
    OpHostsRotateReq,
)

__all__: list[str] = []


@OPERATOR_TABLE.on(OpHostsListReq)
async def _hosts_list(api: OperatorApi, req: OpHostsListReq) -> list[HostView]:
    return await api.host_admin.list()


@OPERATOR_TABLE.on(OpHostsAddReq)
async def _hosts_add(api: OperatorApi, req: OpHostsAddReq) -> HostCredential:
    return await api.host_admin.add(req.name, req.expires_at)


@OPERATOR_TABLE.on(OpHostsRotateReq)
async def _hosts_rotate(api: OperatorApi, req: OpHostsRotateReq) -> HostCredential:
    return await api.host_admin.rotate(req.name, req.expires_at)


@OPERATOR_TABLE.on(OpHostsRevokeReq)
async def _hosts_revoke(api: OperatorApi, req: OpHostsRevokeReq) -> HostView:
    return await api.host_admin.revoke(req.name)
