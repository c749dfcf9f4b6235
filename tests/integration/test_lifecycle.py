"""Lifecycle on the coordinator: the target table, approvals, the meta repo."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from hyperhive.config import AgentConfig, HivePaths, load_agent_config
from hyperhive.errors import (
    Conflict,
    CycleRefused,
    HiveError,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    UnknownCommand,
)
from hyperhive.gitrepo import GitRepo
from hyperhive.permissions import Capability, ToolGroup
from hyperhive.topology import MAX_DEPTH
from tests.support.hive import (
    agent,
    agent_call,
    coordinator,
    hive_with_idle_host,
    op_call,
    operator,
    running_hive,
    seed_home,
)
from tests.support.surfaces import until

pytestmark = pytest.mark.anyio

MANAGER = AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))
TREE = {"queen": None, "alice": None, "bob": "alice", "carol": "bob", "eve": None}


def _seed(tmp_path: Path, store_url: str | None, **overrides: AgentConfig) -> Path:
    agents = {name: overrides.get(name, MANAGER) for name in TREE}
    seed_home(tmp_path, agents, TREE, store_url=store_url)
    return tmp_path


@pytest.mark.parametrize("verb", ["kill", "start", "restart", "update"])
async def test_lifecycle_verbs_follow_the_tree(
    tmp_path: Path, hive_store_url: str | None, verb: str
) -> None:
    async with coordinator(_seed(tmp_path, hive_store_url)) as c:
        async with agent(c.paths, "bob") as bob:
            with pytest.raises(PermissionDenied, match="not a descendant"):
                await agent_call(bob, verb, agent="alice")  # its parent
            with pytest.raises(PermissionDenied, match="not a descendant"):
                await agent_call(bob, verb, agent="eve")  # a stranger
            with pytest.raises(NotFound):
                await agent_call(bob, verb, agent="nobody")
            result = await agent_call(bob, verb, agent="carol")
            assert isinstance(result, dict) and result["agent"] == "carol"
        async with agent(c.paths, "alice") as alice:
            assert isinstance(await agent_call(alice, verb, agent="carol"), dict)  # grandchild


async def test_kill_is_sticky_and_tells_the_submitter(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    async with coordinator(_seed(tmp_path, hive_store_url)) as c:
        async with agent(c.paths, "alice") as alice:
            await agent_call(alice, "kill", agent="carol")
            ends = await agent_call(alice, "get_loose_ends")
        assert isinstance(ends, list)
        # carol's nearest ancestor with approvals is bob.
        async with agent(c.paths, "bob") as bob:
            bob_ends = await agent_call(bob, "get_loose_ends")
        assert isinstance(bob_ends, list)
        assert [e["key"] for e in bob_ends] == ["killed:carol"]
        agents = await c.operator_api.agents_view()
        carol = await c.store.agents.get("carol")
        assert not carol.desired_running
        assert not next(a for a in agents if a.name == "carol").running


async def test_destroy_never_self_or_an_ancestor(
    tmp_path: Path, hive_store_url: str | None, claude_bin: Path
) -> None:
    async with hive_with_idle_host(_seed(tmp_path, hive_store_url), claude_bin) as c:
        async with agent(c.paths, "carol") as carol:
            with pytest.raises(PermissionDenied, match=r"\(self\)"):
                await agent_call(carol, "destroy", agent="carol")
            with pytest.raises(PermissionDenied, match="an ancestor"):
                await agent_call(carol, "destroy", agent="alice")
        async with agent(c.paths, "alice") as alice:
            with pytest.raises(Conflict, match="still has children"):
                await agent_call(alice, "destroy", agent="bob")
            done = await agent_call(alice, "destroy", agent="carol")
        assert isinstance(done, dict) and done["destroyed"]
        assert not c.registry.exists("carol") and "carol" not in c.topology_store.read_cached()
        assert Path(str(done["data_moved_to"])).exists()
        assert "destroy carol" in c.mirror.git.log(1)[0]["subject"]
        assert not c.paths.agent_sock("carol").exists()


async def test_diagnostics_and_capabilities(
    tmp_path: Path, hive_store_url: str | None, claude_bin: Path
) -> None:
    journal = AgentConfig(
        tool_groups=list(ToolGroup.MANAGER_DEFAULT), capabilities=[Capability.READ_HOST_JOURNAL]
    )
    home = _seed(tmp_path, hive_store_url, queen=journal)
    # The logs are the host's: it reads them from its disk when the coordinator asks.
    log = HivePaths(home).logs / "agents" / "carol.log"
    log.parent.mkdir(parents=True)
    log.write_text("".join(f"line {i}\n" for i in range(500)))
    (HivePaths(home).logs / "host.log").write_text("host says hi\n")
    async with running_hive(home, claude_bin) as (c, _host):
        await until(lambda: {"queen", "alice", "carol"} <= set(c.hostlink.placement))
        async with agent(c.paths, "alice") as alice:
            tail = await agent_call(alice, "get_logs", agent="carol", lines=3)
            assert isinstance(tail, dict) and tail["lines"] == ["line 497", "line 498", "line 499"]
            with pytest.raises(PermissionDenied, match="not a descendant"):
                await agent_call(alice, "get_logs", agent="eve")
            with pytest.raises(PermissionDenied, match="read_host_journal"):
                await agent_call(alice, "get_host_journal")
        async with agent(c.paths, "queen") as queen:
            journal_tail = await agent_call(queen, "get_host_journal", lines=5)
            assert isinstance(journal_tail, dict) and journal_tail["host"] == ["host says hi"]
        no_lifecycle = AgentConfig()
        await c.registry.write("eve", no_lifecycle, "drop eve's lifecycle capability")
        async with agent(c.paths, "eve") as eve:
            with pytest.raises(Exception, match="'lifecycle' tool group"):
                await agent_call(eve, "kill", agent="queen")


async def test_init_config_approval_spawns_the_child_under_the_requester(
    tmp_path: Path, hive_store_url: str | None, claude_bin: Path
) -> None:
    async with (
        hive_with_idle_host(_seed(tmp_path, hive_store_url), claude_bin) as c,
        operator(c.paths) as op,
    ):
        async with agent(c.paths, "alice") as alice:
            with pytest.raises(PermissionDenied, match="not your child"):
                await agent_call(alice, "request_init_config", name="eve")
            with pytest.raises(Exception, match="tool_groups"):
                await agent_call(
                    alice,
                    "request_init_config",
                    name="worker",
                    config='tool_groups = ["telepathy"]\n',
                )
            asked = await agent_call(
                alice,
                "request_init_config",
                name="worker",
                config='tool_groups = ["messaging", "meta"]\n',
            )
            assert isinstance(asked, dict)
            with pytest.raises(Conflict, match="already waiting"):
                await agent_call(alice, "request_init_config", name="worker")
        pending = await op_call(op, "approvals")
        assert isinstance(pending, list) and pending[0]["subject"] == "worker"
        assert pending[0]["kind"] == "init_config" and pending[0]["requester"] == "alice"
        shown = await op_call(op, "approval_show", approval_id=asked["approval_id"])
        assert isinstance(shown, dict) and '+    "messaging",' in shown["diff"]
        resolved = await op_call(op, "approve", approval_id=asked["approval_id"])
        assert isinstance(resolved, dict) and resolved["state"] == "approved"
        assert c.topology_store.read_cached()["worker"] == "alice"
        applied = load_agent_config(c.paths.applied_config("worker"))
        assert applied.tool_groups == [ToolGroup.MESSAGING, ToolGroup.META]
        # Seeded by the agent's host, which the approval does not wait on.
        proposed = GitRepo(c.paths.agent_config_repo("worker"))

        def seeded() -> bool:
            try:
                return "messaging" in proposed.show("HEAD", "agent.toml")
            except HiveError:
                return False

        await until(seeded)
        assert "init worker (requested by alice)" in c.mirror.git.log(1)[0]["subject"]
        assert json.loads(c.paths.topology.read_text())["worker"] == "alice"
        async with agent(c.paths, "alice") as alice:
            ends = await agent_call(alice, "get_loose_ends")
        # alice is stopped here (no turn takes her mail): her inbox holds the notice.
        box = await op_call(op, "messages", agent="alice")
        assert isinstance(box, dict) and isinstance(ends, list)
        notice = next(
            m["body"] for m in box["inbox"] if str(m["body"]).startswith("[approval_resolved]")
        )
        assert notice.startswith("[approval_resolved] Your approval #")
        assert "for worker was approved and applied" in notice and "send it its task" in notice
        # (the seeded agents stopped for this test leave killed:* todos of their own)
        todos = [e["key"] for e in ends if e["kind"] == "todo"]
        assert sorted(k for k in todos if k.endswith(":worker")) == [
            "config_ready:worker",
            "spawned:worker",
        ]
        assert c.mirror.git.clean_tree()


async def test_deny_needs_a_reason_and_reaches_the_asker(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    async with coordinator(_seed(tmp_path, hive_store_url)) as c, operator(c.paths) as op:
        async with agent(c.paths, "eve") as eve:
            asked = await agent_call(eve, "request_init_config", name="scout")
        assert isinstance(asked, dict)
        with pytest.raises(InvalidRequest, match="reason"):
            await op_call(op, "deny", approval_id=asked["approval_id"])
        await op_call(op, "deny", approval_id=asked["approval_id"], reason="not now")
        with pytest.raises(Conflict, match="already denied"):
            await op_call(op, "approve", approval_id=asked["approval_id"])
        assert not c.registry.exists("scout")
        async with agent(c.paths, "eve") as eve:
            woke = await agent_call(eve, "wait", timeout=2)
        assert isinstance(woke, dict)
        body = woke["messages"][0]["body"]
        assert body.startswith("[approval_resolved] ") and "was denied (not now)" in body


async def test_apply_commit_of_a_descendants_proposed_config(
    tmp_path: Path, hive_store_url: str | None, claude_bin: Path
) -> None:
    async with (
        hive_with_idle_host(_seed(tmp_path, hive_store_url), claude_bin) as c,
        operator(c.paths) as op,
    ):
        repo = GitRepo(c.paths.agent_config_repo("carol"))
        (repo.path / "agent.toml").write_text('tool_groups = ["messaging", "web_tools"]\n')
        # As bob would, from inside his sandbox: an ordinary git commit.
        git = ["git", "-C", str(repo.path), "-c", "user.name=bob", "-c", "user.email=b@h"]
        await anyio.run_process([*git, "commit", "-qam", "give carol the web"])
        async with agent(c.paths, "eve") as eve:
            with pytest.raises(PermissionDenied, match="not a descendant"):
                await agent_call(eve, "request_apply_commit", agent="carol")
        async with agent(c.paths, "bob") as bob:
            with pytest.raises(NotFound, match="no commit"):
                await agent_call(bob, "request_apply_commit", agent="carol", commit="deadbeef")
            asked = await agent_call(bob, "request_apply_commit", agent="carol")
        assert isinstance(asked, dict)
        shown = await op_call(op, "approval_show", approval_id=asked["approval_id"])
        assert isinstance(shown, dict) and "web_tools" in shown["diff"]
        await op_call(op, "approve", approval_id=asked["approval_id"])
        assert ToolGroup.WEB_TOOLS in c.registry.config("carol").tool_groups
        assert c.mirror.git.log(1)[0]["subject"].startswith("apply carol")
        async with agent(c.paths, "bob") as bob:
            ends = await agent_call(bob, "get_loose_ends")
        assert isinstance(ends, list) and "rebuilt:carol" in [e["key"] for e in ends]


async def test_operator_perms_set_is_an_approval_with_the_exact_tools(
    tmp_path: Path, hive_store_url: str | None, claude_bin: Path
) -> None:
    async with (
        hive_with_idle_host(_seed(tmp_path, hive_store_url), claude_bin) as c,
        operator(c.paths) as op,
    ):
        before = await op_call(op, "agent_config", agent="eve")
        assert isinstance(before, dict) and "WebFetch" not in before["tools_arg"]
        with pytest.raises(InvalidRequest, match="known groups"):
            await op_call(op, "perms_set", agent="eve", tool_groups=["wizardry"])
        proposal = await op_call(
            op, "perms_set", agent="eve", tool_groups=["messaging", "web_tools"]
        )
        assert isinstance(proposal, dict)
        assert c.registry.config("eve").tool_groups == list(ToolGroup.MANAGER_DEFAULT)
        await op_call(op, "approve", approval_id=proposal["approval_id"])
        after = await op_call(op, "agent_config", agent="eve")
        assert isinstance(after, dict)
        assert after["tools_arg"] == "Edit,Glob,Grep,Read,Skill,Write,WebFetch,WebSearch"
        assert "mcp__hyperhive__kill" not in after["allowed_tools_arg"]


async def test_reconcile_on_start_commits_the_tree(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    home = _seed(tmp_path, hive_store_url)
    (home / "meta" / "topology.json").write_text("{broken")
    async with coordinator(home) as c:
        assert set(c.topology_store.read_cached()) == set(TREE)
        assert all(
            parent is None for parent in c.topology_store.read_cached().values()
        )  # safe degradation
        assert c.mirror.git.clean_tree()


async def test_the_removed_update_meta_inputs_is_refused_clearly(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    """It pinned a claude version nothing read: removed, and an old pending row only denied."""
    async with coordinator(_seed(tmp_path, hive_store_url)) as c, operator(c.paths) as op:
        async with agent(c.paths, "queen") as queen:
            with pytest.raises(UnknownCommand, match="request_update_meta_inputs"):
                await queen.call_json(
                    {"cmd": "request_update_meta_inputs", "claude_version": "2.1.400"}
                )
        legacy = await c.loose_ends.create_approval(
            "update_meta_inputs", "queen", "claude-code", {"claude_version": "2.1.400"}
        )
        listed = await op_call(op, "approvals")
        assert isinstance(listed, list) and listed[0]["kind"] == "update_meta_inputs"
        with pytest.raises(Conflict, match="deny it instead"):
            await op_call(op, "approve", approval_id=legacy)
        denied = await op_call(op, "deny", approval_id=legacy, reason="gone")
        assert isinstance(denied, dict) and denied["state"] == "denied"
        assert not (c.paths.meta / "inputs.toml").exists()


async def test_init_config_chains_keep_set_parents_depth_limit(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    chain: dict[str, str | None] = {"n0": None}
    for i in range(1, MAX_DEPTH + 1):
        chain[f"n{i}"] = f"n{i - 1}"
    seed_home(tmp_path, dict.fromkeys(chain, MANAGER), chain, store_url=hive_store_url)
    async with coordinator(tmp_path) as c:
        async with agent(c.paths, f"n{MAX_DEPTH}") as deepest:
            with pytest.raises(CycleRefused, match="levels deep"):
                await agent_call(deepest, "request_init_config", name="one-more")
        async with agent(c.paths, f"n{MAX_DEPTH - 1}") as above:
            asked = await agent_call(above, "request_init_config", name="one-more")
        assert isinstance(asked, dict) and asked["state"] == "pending"
