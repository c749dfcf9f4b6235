"""Turn records are read from the host that keeps them, by the operator (all of them) and
by an agent (its own and its descendants' only, the coordinator deciding by topology).

The records are written into the host's real store (the recorder's own writer) while the
hive runs; every read goes operator/agent socket → coordinator → host link → host.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperhive.agent.turnstore import TurnStore
from hyperhive.config import AgentConfig, HivePaths
from hyperhive.errors import NotFound, PermissionDenied
from hyperhive.permissions import ToolGroup
from hyperhive.protocol.turns import OpTurnShowReq, OpTurnsListReq, OpTurnsSearchReq
from tests.support.hive import agent, agent_call, operator, running_hive, seed_home
from tests.support.surfaces import until

pytestmark = pytest.mark.anyio

BOB_TURN = "bob.20260101T080000Z-0000beef"
ALICE_TURN = "alice.20260101T090000Z-0000cafe"


def _seed(home: Path) -> HivePaths:
    return seed_home(
        home,
        dict.fromkeys(
            ("alice", "bob", "carol"), AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))
        ),
        topology={"alice": None, "bob": "alice", "carol": None},
    )


def _record(paths: HivePaths, agent_name: str, turn: str, started: float, found: str) -> None:
    store = TurnStore(paths.agent_dir(agent_name) / "turns", agent_name)
    store.begin(turn, "turn", started, {"messages": []}, "mail from operator", "go")
    store.step(turn, 0, "tool_use", '{"cmd": "ls"}', call_id="c1", name="mcp__bash__run")
    store.step(turn, 1, "tool_result", f"the result holds {found}", call_id="c1")
    store.finish(turn, "ok", started + 5, 2)
    store.counted(turn, 0.25, 100, 10)
    store.close()


async def test_the_operator_reads_all_and_an_agent_its_own_and_its_descendants(
    tmp_path: Path, claude_bin: Path
) -> None:
    paths = _seed(tmp_path)
    async with running_hive(tmp_path, claude_bin) as (c, _host), operator(c.paths) as op:
        await until(lambda: {"alice", "bob", "carol"} <= set(c.hostlink.placement))
        _record(paths, "bob", BOB_TURN, 1767254400.0, "quince")
        _record(paths, "alice", ALICE_TURN, 1767258000.0, "quince and damson")

        [listed] = await op.call(OpTurnsListReq(cmd="turns_list", agent="bob"))
        assert (listed.id, listed.cost_usd, listed.tools) == (BOB_TURN, 0.25, ["mcp__bash__run"])
        shown = await op.call(OpTurnShowReq(cmd="turn_show", turn=BOB_TURN))
        assert [s.text for s in shown.steps] == ['{"cmd": "ls"}', "the result holds quince"]
        hits = await op.call(OpTurnsSearchReq(cmd="turns_search", text="quince"))
        assert [h.turn.id for h in hits] == [ALICE_TURN, BOB_TURN]  # every agent, newest first
        with pytest.raises(NotFound, match="no turn bob.20200101T000000Z-00000000"):
            await op.call(OpTurnShowReq(cmd="turn_show", turn="bob.20200101T000000Z-00000000"))
        with pytest.raises(NotFound):
            await op.call(OpTurnShowReq(cmd="turn_show", turn="not-a-turn-id"))
        with pytest.raises(NotFound):
            await op.call(OpTurnsListReq(cmd="turns_list", agent="nobody"))

        # A manager reads its child's turns, through its tool.
        async with agent(c.paths, "alice") as alice:
            mine = await agent_call(alice, "get_turns", agent="bob")
            assert isinstance(mine, dict)
            assert [t["id"] for t in mine["turns"]] == [BOB_TURN]
            one = await agent_call(alice, "get_turns", turn=BOB_TURN)
            assert isinstance(one, dict) and one["record"]["steps"][1]["text"].endswith("quince")
            found = await agent_call(alice, "get_turns", agent="bob", search="quince")
            assert isinstance(found, dict) and [h["turn"]["id"] for h in found["hits"]] == [
                BOB_TURN
            ]
            own = await agent_call(alice, "get_turns")
            assert isinstance(own, dict) and [t["id"] for t in own["turns"]] == [ALICE_TURN]
        # The child reads its own, not its parent's; another root reads neither.
        async with agent(c.paths, "bob") as bob:
            own = await agent_call(bob, "get_turns")
            assert isinstance(own, dict) and [t["id"] for t in own["turns"]] == [BOB_TURN]
            with pytest.raises(PermissionDenied, match="not a descendant"):
                await agent_call(bob, "get_turns", agent="alice")
            with pytest.raises(PermissionDenied, match="not a descendant"):
                await agent_call(bob, "get_turns", turn=ALICE_TURN)
        async with agent(c.paths, "carol") as carol:
            with pytest.raises(PermissionDenied, match="not a descendant"):
                await agent_call(carol, "get_turns", agent="bob")
            with pytest.raises(PermissionDenied, match="not a descendant"):
                await agent_call(carol, "get_turns", turn=BOB_TURN, agent="carol")

        # Stopped, its turns are still read from the host it ran on.
        await c.hostlink.deactivate("bob", graceful=False)
        [after] = await op.call(OpTurnsListReq(cmd="turns_list", agent="bob"))
        assert after.id == BOB_TURN
