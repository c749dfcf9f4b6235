"""What the model reads, as the real claude CLI sends it: skills, system prompt, schemas.

One hive, a root manager (queen) and a default agent under it (alice), each
woken once; the scripted model server records the first request of each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.agent.skills import SKILLS
from hyperhive.config import AgentConfig
from hyperhive.permissions import ToolGroup
from tests.support.hive import agent_env, op_call, operator, running_hive, seed_home
from tests.support.model_server import ModelServer, RecordedRequest, always, text
from tests.support.surfaces import until

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(150)]

SKILLS_HEAD = "The following skills are available for use with the Skill tool:"


def _system(request: RecordedRequest) -> str:
    return json.dumps(request.body.get("system"))


def _skills_listing(request: RecordedRequest) -> list[str]:
    """The skill names claude lists to the model in this request."""
    blob = json.loads(json.dumps(request.body["messages"]))
    texts: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, str):
            texts.append(node)
        elif isinstance(node, list):
            for n in node:
                walk(n)
        elif isinstance(node, dict):
            for v in node.values():
                walk(v)

    walk(blob)
    for chunk in texts:
        if SKILLS_HEAD in chunk:
            block = chunk.split(SKILLS_HEAD, 1)[1].split("\n\n", 2)[1]
            return [line[2:].split(":", 1)[0] for line in block.splitlines() if line[:2] == "- "]
    return []


async def test_skills_prompt_and_lean_schemas_reach_the_model(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    model_server.set_script(always(text("nothing to do")))
    env = agent_env(model_server.url)
    seed_home(
        tmp_path,
        {
            "queen": AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT), env=env),
            "alice": AgentConfig(env=env),
        },
        {"queen": None, "alice": "queen"},
    )
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: {"queen", "alice"} <= set(host.agents))
        async with operator(c.paths) as op:
            for name in ("queen", "alice"):
                await op_call(op, "send", to=name, body="hello")

        def first(agent: str) -> RecordedRequest | None:
            marker = f"You are {agent}, an agent of a hyperhive"
            return next((r for r in model_server.main_requests if marker in _system(r)), None)

        await anyio.to_thread.run_sync(
            lambda: model_server.wait_for(lambda _: bool(first("queen") and first("alice")), 90)
        )
        queen, alice = first("queen"), first("alice")
        assert queen is not None and alice is not None

        # The hive's skills are installed in each agent's HOME and listed by claude;
        # claude's bundled ones (dataviz, update-config, …) are not.
        home = c.paths.agent_home("alice")
        assert (home / ".claude" / "skills" / "hive-basics" / "SKILL.md").is_file()
        listed_alice = _skills_listing(alice)
        assert {"hive-basics", "hive-loose-ends", "hive-subagents"} <= set(listed_alice)
        assert "hive-children" not in listed_alice  # no lifecycle group
        assert set(SKILLS) <= set(_skills_listing(queen))
        assert not {"dataviz", "update-config", "keybindings-help"} & set(listed_alice)

        # The appended system prompt, per role.
        assert "hive-children skill" in _system(queen)
        assert "hive-children" not in _system(alice)
        queen_tools = {t["name"]: t for t in queen.body["tools"]}
        assert "starts idle" in queen_tools["mcp__hyperhive__request_init_config"]["description"]
        assert "mcp__hyperhive__request_init_config" not in {t["name"] for t in alice.body["tools"]}
        assert str(c.paths.agent_state("alice")) in _system(alice)

        # Lean schemas: no pydantic titles, no anyOf-with-null.
        hive_tools = [t for t in alice.body["tools"] if t["name"].startswith("mcp__")]
        assert {t["name"] for t in hive_tools} >= {"mcp__hyperhive__send", "mcp__bash__run"}
        schemas = json.dumps([t["input_schema"] for t in hive_tools])
        assert '"title"' not in schemas and '"anyOf"' not in schemas
        send = next(t for t in hive_tools if t["name"] == "mcp__hyperhive__send")
        assert "[msg #N]" in send["input_schema"]["properties"]["in_reply_to"]["description"]
