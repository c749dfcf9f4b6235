"""What is deployed, as agents read it: an agent's own applied agent.toml (named in its
``get_agent_meta``, rewritten by its host on each activation) and, with ``meta_read``, a
descendant's applied config and deploy log (``get_deployed``), on both stores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hyperhive.config import AgentConfig, dump_agent_config, parse_agent_config
from hyperhive.errors import NotFound, PermissionDenied
from hyperhive.permissions import Capability, ToolGroup
from tests.support.hive import agent, agent_call, coordinator, running_hive, seed_home
from tests.support.surfaces import result_text, surface_client, until

pytestmark = pytest.mark.anyio

MANAGER = AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))
READER = MANAGER.model_copy(update={"capabilities": [Capability.META_READ]})
# queen reads what is deployed; ned manages ola but may not read it; bob is a stranger.
TREE = {"queen": None, "alice": "queen", "kid": "alice", "ned": None, "ola": "ned", "bob": None}
AGENTS = {
    "queen": READER,
    "alice": AgentConfig(model="sonnet"),
    "kid": AgentConfig(),
    "ned": MANAGER,
    "ola": AgentConfig(),
    "bob": READER,
}


async def test_a_reader_reads_its_descendants_deployed_config_and_log_only(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    seed_home(tmp_path, AGENTS, TREE, store_url=hive_store_url)
    async with coordinator(tmp_path) as c:
        async with agent(c.paths, "queen") as queen:
            for name in ("alice", "kid"):  # a child, a grandchild
                got = await agent_call(queen, "get_deployed", agent=name)
                assert isinstance(got, dict)
                assert got["config"] == dump_agent_config(AGENTS[name]) == c.registry.text(name)
                assert got["broken"] is None
                # The seeded home was adopted into the store: one entry each, so far.
                assert [(e["action"], e["message"]) for e in got["log"]] == [
                    ("import", f"adopt {c.paths.meta} into the store")
                ]
            with pytest.raises(PermissionDenied, match="bob is not your descendant"):
                await agent_call(queen, "get_deployed", agent="bob")
            with pytest.raises(PermissionDenied, match="not your descendant"):
                await agent_call(queen, "get_deployed", agent="queen")  # itself
            with pytest.raises(NotFound, match="nobody"):
                await agent_call(queen, "get_deployed", agent="nobody")
        async with agent(c.paths, "bob") as bob:  # the capability, but not its family
            with pytest.raises(PermissionDenied, match="alice is not your descendant"):
                await agent_call(bob, "get_deployed", agent="alice")
        async with agent(c.paths, "alice") as alice:  # its parent holds it; alice does not
            with pytest.raises(PermissionDenied, match="needs the meta_read capability"):
                await agent_call(alice, "get_deployed", agent="kid")
        async with agent(c.paths, "ned") as ned:  # a manager of ola, without the capability
            with pytest.raises(
                PermissionDenied, match=r"meta_read capability, which ned does not have.*perms"
            ):
                await agent_call(ned, "get_deployed", agent="ola")

        # Two changes of alice's config: the log has them newest first, as many as asked.
        await c.registry.write("alice", AgentConfig(model="opus"), "apply alice 1 (by queen)")
        await c.registry.write("alice", AgentConfig(model="haiku"), "apply alice 2 (by queen)")
        async with agent(c.paths, "queen") as queen:
            got = await agent_call(queen, "get_deployed", agent="alice", entries=2)
            assert isinstance(got, dict)
            assert parse_agent_config(got["config"]).model == "haiku"
            assert [(e["action"], e["message"]) for e in got["log"]] == [
                ("apply", "apply alice 2 (by queen)"),
                ("apply", "apply alice 1 (by queen)"),
            ]
            seqs = [e["seq"] for e in got["log"]]
            assert seqs[0] == seqs[1] + 1


async def test_an_agent_reads_its_applied_config_and_it_follows_an_approved_change(
    tmp_path: Path, hive_store_url: str | None, claude_bin: Path
) -> None:
    seed_home(tmp_path, AGENTS, TREE, store_url=hive_store_url)
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(
            lambda: (
                "alice" in host.agents
                and "queen" in host.agents
                and (c.paths.agent_config_repo("alice") / "agent.toml").exists()
            ),
            60,
        )
        applied = c.paths.agent_runtime("alice") / "agent.toml"
        async with surface_client(host, "alice", "hyperhive") as mcp:
            meta = json.loads(result_text(await mcp.call_tool("get_agent_meta", {})))
            other = json.loads(result_text(await mcp.call_tool("get_agent_meta", {"name": "kid"})))
        assert meta["applied_config"] == str(applied)
        assert "applied_config" not in other  # another agent's file is not in alice's reach
        assert applied.read_text() == c.registry.text("alice")
        assert parse_agent_config(applied.read_text()).model == "sonnet"

        asked = await c.approvals.propose(
            "operator", "alice", AgentConfig(model="opus"), "the operator picks opus"
        )
        assert applied.read_text() == c.registry.text("alice")  # proposed is not applied
        await c.approvals.resolve(asked.approval_id, True)
        # The rebuild is a new activation on the host, which writes the file anew.
        await until(lambda: applied.read_text() == c.registry.text("alice"), 60)
        assert parse_agent_config(applied.read_text()).model == "opus"

        # Its parent reviews it: the approved commit is the newest entry of the log.
        async with surface_client(host, "queen", "hyperhive") as mcp:
            listed = {t.name for t in (await mcp.list_tools()).tools}
            text = result_text(await mcp.call_tool("get_deployed", {"agent": "alice"}))
        assert "get_deployed" in listed
        lines = text.splitlines()
        assert lines[0] == "== alice's applied agent.toml"
        assert lines[1] == 'model = "opus"'
        assert lines[2] == "== its deploy log, newest first"
        assert lines[3].endswith(f"apply: apply alice {asked.commit[:12]} (requested by operator)")
        assert lines[4].endswith(f"import: adopt {c.paths.meta} into the store")
        assert len(lines) == 5
        async with surface_client(host, "alice", "hyperhive") as mcp:
            listed = {t.name for t in (await mcp.list_tools()).tools}
        assert "get_deployed" not in listed  # its description costs only those who hold it
