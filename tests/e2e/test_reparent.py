"""A reparent reaches a running agent, on the real claude CLI: no restart needed.

The kid runs under p1; the operator moves it under p2 and wakes it. Its next
turn's system prompt names p2, its ``send(to="<parent>")`` reaches p2, a bash
task it starts sees ``HIVE_PARENT=p2``, the active agents p1 and p2 know their
new descendants, and the move is a commit in the meta repo's log.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperhive.gitrepo import GitRepo
from tests.support.model_server import ModelServer
from tests.support.surfaces import result_text, surface_client, until
from tests.support.turn_scenarios import REPARENT, Run, agent_of, run_scenario

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(180)]


def _system_prompt(run: Run, agent: str) -> str:
    """The appended system prompt of ``agent``'s latest turn, as claude sent it."""
    last = run.requests_of(agent)[-1].body
    return str(last.get("system")) + str(last.get("messages"))


async def test_a_running_agent_moved_to_a_new_parent_knows_it_next_turn(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    async with run_scenario(REPARENT, tmp_path, model_server, claude_bin) as run:
        rts = run.host.agents
        kid = rts["kid"]
        assert "Parent: p2." in _system_prompt(run, "kid")
        assert "Parent: p1." not in _system_prompt(run, "kid")

        async def from_agents(agent: str) -> list[tuple[str, str]]:
            inbox = (await run.op("messages", agent=agent))["inbox"]
            return [(m["from"], m["body"]) for m in inbox if m["from"] != "operator"]

        assert await from_agents("p2") == [("kid", "hello new parent")]
        assert await from_agents("p1") == []
        assert [agent_of(r.body) for r in run.requests].count("p1") == 0  # no wake for p1
        assert run.at_minimum()  # the kid's send and sign-off, p2's one turn: nothing more

        # The same active agent (no restart), told its place; its processes get the new parent.
        assert rts["kid"] is kid and kid.spec.parent == "p2"
        assert kid.spec.hive_env()["HIVE_PARENT"] == "p2"
        assert (rts["p1"].spec.descendants, rts["p2"].spec.descendants) == ((), ("kid",))
        async with surface_client(run.host, "kid", "bash") as bash:
            result = await bash.call_tool(
                "run", {"cmd": "echo parent=$HIVE_PARENT", "wait_seconds": 20}
            )
        assert "parent=p2" in result_text(result), result_text(result)[:300]

        log = GitRepo(run.paths.meta).log(5)
        assert log[0]["subject"] == "reparent kid: p1 -> p2"

        # Promoted to root while asleep: the same active agent, its parent gone at once.
        changed = await run.op("set_parent", child="kid", new_parent=None)
        assert changed["changed"] is True
        await until(lambda: kid.spec.parent is None)
        assert rts["kid"] is kid and "HIVE_PARENT" not in kid.spec.hive_env()
        assert rts["p2"].spec.descendants == ()
        assert GitRepo(run.paths.meta).log(1)[0]["subject"] == "reparent kid: p2 -> (root)"
