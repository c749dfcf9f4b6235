"""What is deployed, read by agents on the real claude CLI against the scripted model.

The parent (holding ``meta_read``) calls ``get_deployed`` on its child and reads the
child's applied agent.toml and deploy log in the tool result; the child calls
``get_agent_meta`` and reads where its own applied agent.toml is, and the file there
is what the store holds. Only the parent is offered ``get_deployed``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hyperhive.config import AgentConfig
from hyperhive.permissions import Capability
from tests.support.model_server import ModelServer, RecordedRequest, text, tool_call
from tests.support.turn_scenarios import MANAGER, Run, Scenario, agent_of, run_scenario

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(180)]

GET_DEPLOYED = "mcp__hyperhive__get_deployed"
GET_META = "mcp__hyperhive__get_agent_meta"


async def _ask(run: Run) -> None:
    await run.op("send", to="queen", body="review what is deployed for alice")
    await run.op("send", to="alice", body="where is your applied config?")


DEPLOYED = Scenario(
    "deployed",
    {
        "queen": MANAGER.model_copy(update={"capabilities": [Capability.META_READ]}),
        "alice": AgentConfig(model="sonnet"),
    },
    {
        "queen": [tool_call(GET_DEPLOYED, {"agent": "alice"}), text("reviewed")],
        "alice": [tool_call(GET_META, {}), text("found it")],
    },
    2,
    _ask,
    topology={"queen": None, "alice": "queen"},
)


def _tool_results(request: RecordedRequest) -> list[str]:
    """The text of every tool result the request carries back to the model."""
    out: list[str] = []
    for message in request.messages:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            inner: Any = block.get("content")
            if isinstance(inner, str):
                out.append(inner)
            else:
                out.extend(b.get("text", "") for b in inner or [] if isinstance(b, dict))
    return out


async def test_a_parent_reads_its_childs_deployed_config_and_the_child_its_own(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    async with run_scenario(DEPLOYED, tmp_path, model_server, claude_bin) as run:
        applied = run.coord.registry.text("alice")
        queen = [r for r in run.requests if agent_of(r.body) == "queen"]
        alice = [r for r in run.requests if agent_of(r.body) == "alice"]
        assert len(queen) == len(alice) == 2 and run.at_minimum()
        assert GET_DEPLOYED in queen[0].tool_names
        assert GET_DEPLOYED not in alice[0].tool_names

        (review,) = _tool_results(queen[1])
        lines = review.splitlines()
        assert lines[0] == "== alice's applied agent.toml"
        assert "\n".join(lines[1 : lines.index("== its deploy log, newest first")]) == (
            applied.rstrip("\n")
        )
        assert lines[-1].endswith(f"import: adopt {run.paths.meta} into the store")

        (meta_text,) = _tool_results(alice[1])
        meta = json.loads(meta_text)
        assert meta["name"] == "alice" and meta["parent"] == "queen"
        path = Path(meta["applied_config"])
        assert path == run.paths.agent_runtime("alice") / "agent.toml"
        assert path.read_text() == applied and 'model = "sonnet"' in applied
