"""Approval payloads are read back as their kind's model, on both stores: rows as earlier
hives stored them still show and apply; one that no longer reads as its kind is shown
as stored, with why, and can only be denied."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperhive.config import AgentConfig, dump_agent_config
from hyperhive.errors import Conflict
from hyperhive.permissions import ToolGroup
from hyperhive.protocol import ApprovalDetail, OpApprovalShowReq, OpResolveReq
from tests.support.hive import agent, agent_call, coordinator, operator, seed_home

pytestmark = pytest.mark.anyio

MANAGER = AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))


async def test_stored_rows_read_as_their_kind_or_as_stored_with_why(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    seed_home(tmp_path, {"queen": MANAGER}, {"queen": None}, store_url=hive_store_url)
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        child = dump_agent_config(AgentConfig(model="haiku"))
        # Written straight into the store, in the shape every hive so far stored them.
        init = await c.store.approvals.create(
            "init_config", "queen", "gina", {"agent": "gina", "config": child}
        )
        damaged = await c.store.approvals.create(
            "apply_commit", "queen", "queen", {"agent": "queen", "commit": "abc123"}
        )

        shown: ApprovalDetail = await op.call(
            OpApprovalShowReq(cmd="approval_show", approval_id=init)
        )
        assert shown.payload.kind == "init_config"
        assert shown.payload.agent == "gina" and shown.payload.config == child
        assert shown.diff is not None and '+model = "haiku"' in shown.diff
        assert shown.effective is not None and shown.effective.parent == "queen"

        broken: ApprovalDetail = await op.call(
            OpApprovalShowReq(cmd="approval_show", approval_id=damaged)
        )
        assert broken.payload.kind == "stored" and broken.payload.stored_kind == "apply_commit"
        assert broken.payload.stored == {"agent": "queen", "commit": "abc123"}
        assert broken.payload.problem == "config: Field required"
        assert broken.diff is None and broken.effective is None
        with pytest.raises(Conflict, match=r"apply_commit request .*config: Field required.*deny"):
            await op.call(OpResolveReq(cmd="approve", approval_id=damaged))
        denied = await op.call(OpResolveReq(cmd="deny", approval_id=damaged, reason="damaged"))
        assert denied.state == "denied"

        # The row an earlier hive stored is carried out like one made today.
        approved = await op.call(OpResolveReq(cmd="approve", approval_id=init))
        assert approved.state == "approved"
        assert c.registry.config("gina").model == "haiku"
        assert c.topology_store.read_cached()["gina"] == "queen"

        # What this hive stores has that same shape: the kind in its column, not the JSON.
        async with agent(c.paths, "queen") as queen:
            asked = await agent_call(queen, "request_init_config", name="hana", config="")
        assert isinstance(asked, dict)
        row = await c.store.approvals.get(int(str(asked["approval_id"])))
        assert row is not None and row.kind == "init_config"
        assert dict(row.payload) == {"agent": "hana", "config": dump_agent_config(AgentConfig())}
