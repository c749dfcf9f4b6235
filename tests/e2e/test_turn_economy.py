"""Turn economy on the real claude CLI: every scenario costs exactly its minimum.

The scenarios (and the bench table that prints the same counts) live in
:mod:`tests.support.turn_scenarios`. A bash task that ends inside ``run``'s
wait window is answered inline and files no todo (spec 001), so the agent
is not woken a turn later with "Your todos changed" and nothing to find. A
task that outlives its turn is listed but wakes nothing until it ends; its
completion then wakes exactly one turn; a manager's child is spawned,
approved and tasked, and a reminder fires, with no turn to spare. A graceful
stop of an idle agent costs its one flush turn, or none with
``flush_on_stop = false``. The
reparent scenario is measured in ``test_reparent.py``, beside what it checks
of the move itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.model_server import ModelServer, RecordedRequest
from tests.support.turn_scenarios import (
    REPARENT,
    SCENARIOS,
    agent_of,
    run_scenario,
    said,
)

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(180)]

TODO_WAKE = "Your todos changed"


def _todo_wakes(reqs: list[RecordedRequest]) -> list[RecordedRequest]:
    return [r for r in reqs if TODO_WAKE in said(r)]


# Not here: the reparent (measured in test_reparent.py).
AT_MINIMUM = [n for n in SCENARIOS if n != REPARENT.name]


@pytest.mark.parametrize("name", AT_MINIMUM)
async def test_every_scenario_costs_its_minimum(
    name: str, tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    scenario = SCENARIOS[name](tmp_path, model_server.url)
    async with run_scenario(scenario, tmp_path, model_server, claude_bin) as run:
        assert run.at_minimum(), [(agent_of(r.body), said(r)[-200:]) for r in run.requests]
        reqs = run.requests
        if name == "bash task ends inline":
            assert "inline-result" in said(reqs[1])  # the result came back inside the call
            assert _todo_wakes(reqs) == []
        elif name == "bash task ends later":
            assert "task started" in said(reqs[1])
            # Its "running" todo is listed, but the turn that started it is not woken
            # for that; its completion wakes exactly one turn.
            assert _todo_wakes(reqs) == [reqs[2]]
        elif name == "child spawned, approved, tasked":
            assert [r for r in run.requests_of("worker") if "do the thing" in said(r)]
