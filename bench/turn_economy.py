"""Turn economy: what each agent scenario costs in model requests and turns (issue 13).

A real model pays for every request with its whole context, so a wasted
turn (a wake for nothing, a result that needs a second look) is the most
expensive thing an agent can do. Each scenario runs on the real claude CLI
against the scripted model server, in a hive of its own, exactly as the
e2e tests run it (:mod:`tests.support.turn_scenarios`, one home for both);
the figure is beside the minimum the scenario needs (one model request per
scripted answer). Counted, not timed.
"""

from __future__ import annotations

from pathlib import Path

import anyio
from tests.support.model_server import ModelServer
from tests.support.turn_scenarios import SCENARIOS, Scenario, run_scenario

from bench.registry import Context, Sizes, benchmark
from hyperhive.agent.host import resolve_claude_bin

__all__ = ["turn_economy"]


# Each scenario with the harness's settle window as shipped (0), and with 0.2 s (its
# old default): a non-zero default would be kept only if the second rows saved a turn.
SETTLES: tuple[tuple[str, str], ...] = (("", ""), (" (settle 0.2 s)", "settle_seconds = 0.2\n"))


async def _measure(
    scenario: Scenario, home: Path, model: ModelServer, label: str, hive_toml: str
) -> Sizes:
    claude = Path(resolve_claude_bin(None))
    async with run_scenario(scenario, home, model, claude, hive_toml) as run:
        requests, turns = len(run.requests), run.turns()
    return Sizes(
        f"turn_economy{label}: {scenario.name}",
        (
            ("model requests", requests),
            ("minimum", scenario.min_requests),
            ("turns", turns),
            ("minimum turns", scenario.min_turns),
        ),
        "= minimum",
        unit="count",
    )


@benchmark("turn_economy.scenarios")
def turn_economy(ctx: Context) -> list[Sizes]:
    rows: list[Sizes] = []
    for label, hive_toml in SETTLES:
        for build in SCENARIOS.values():
            home = ctx.scratch("t")
            with ModelServer() as model:
                scenario = build(home, model.url)
                rows.append(anyio.run(_measure, scenario, home, model, label, hive_toml))
    last = rows[-1]
    rows[-1] = Sizes(
        last.benchmark,
        last.parts,
        last.target,
        "counted on the scripted model's main requests until every agent is idle; a "
        "probe message then shows any wake left over, which would count here",
        unit="count",
    )
    return rows
