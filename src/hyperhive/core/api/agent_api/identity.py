"""Who an agent is: its status line, its meta as others see it, and its forge and
Matrix identities (the admin credentials stay in the coordinator)."""

from __future__ import annotations

from hyperhive import __version__
from hyperhive.core.api.agent_api.base import AGENT_TABLE, STATUS_MAX, AgentApi
from hyperhive.errors import InvalidRequest, LimitExceeded, PermissionDenied, ToolGroupDenied
from hyperhive.permissions import ToolGroup
from hyperhive.protocol import (
    AgentMeta,
    CreateRepoReq,
    ForgeTokenIssued,
    ForgeTokenReq,
    GetAgentMetaReq,
    MatrixAccount,
    MatrixAccountReq,
    MatrixSignedIn,
    RepoCreated,
    SetStatusReq,
    StatusSet,
)

__all__: list[str] = []


@AGENT_TABLE.on(SetStatusReq)
async def _set_status(api: AgentApi, req: SetStatusReq) -> StatusSet:
    text = req.text.strip()
    if "\n" in text or "\r" in text:
        raise InvalidRequest("status must be a single line")
    if len(text) > STATUS_MAX:
        raise LimitExceeded(f"status is {len(text)} characters; the limit is {STATUS_MAX}")
    await api.agent_state.set_status(api.name, text)
    # Before the answer: the agent's next get_agent_meta must not see the old status.
    await api.hostlink.meta_changed(api.name)
    return StatusSet(status_text=text)


@AGENT_TABLE.on(GetAgentMetaReq)
async def _get_agent_meta(api: AgentApi, req: GetAgentMetaReq) -> AgentMeta:
    name = req.name or api.name
    api.registry.require(name)
    row = await api.agent_state.row(name)
    return AgentMeta(
        name=name,
        hive_name=api.hive_name,
        hyperhive_rev=__version__,
        running=api.hostlink.running(name),
        status_text=row.status_text,
        status_set_at=row.status_set_at,
        parent=api.tree().get(name),
        matrix_accounts=_matrix_accounts(api, name),
    )


def _matrix_accounts(api: AgentApi, name: str) -> list[MatrixAccount] | None:
    """``name``'s Matrix identity, if its config enables one and the hive has a homeserver."""
    config = api.registry.applied(name)
    if api.matrix is None or config is None or not config.matrix.enabled:
        return None
    return [
        MatrixAccount(name=name, user_id=api.matrix.user_id(name), homeserver=api.matrix.homeserver)
    ]


def _require_forge(api: AgentApi) -> None:
    # Checked against the applied config: an agent whose group was taken away (and
    # its identity revoked) cannot mint itself a new one.
    if ToolGroup.FORGE not in api.registry.config(api.name).tool_groups:
        raise ToolGroupDenied(
            f"{api.name} has no 'forge' tool group, so no forge identity; the operator "
            "can grant it in the permissions tab (hivectl perms set)"
        )


@AGENT_TABLE.on(ForgeTokenReq)
async def _forge_token(api: AgentApi, req: ForgeTokenReq) -> ForgeTokenIssued:
    _require_forge(api)
    return await api.identities.forge_token(api.name)


@AGENT_TABLE.on(CreateRepoReq)
async def _create_repo(api: AgentApi, req: CreateRepoReq) -> RepoCreated:
    _require_forge(api)
    return await api.identities.create_repo(api.name, req.name, req.description, req.private)


@AGENT_TABLE.on(MatrixAccountReq)
async def _matrix_account(api: AgentApi, req: MatrixAccountReq) -> MatrixSignedIn:
    if not api.registry.config(api.name).matrix.enabled:
        raise PermissionDenied(
            f"{api.name} has no Matrix identity ([matrix] enabled = false in its "
            "applied agent.toml)"
        )
    return await api.identities.matrix_account(api.name)
