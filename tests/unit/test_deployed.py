"""What is deployed, on the host and in words: the applied agent.toml an agent reads
follows its spec; ``get_deployed`` and ``get_agent_meta`` render what the model reads."""

from __future__ import annotations

import calendar
import json
from pathlib import Path

from hyperhive.agent.active import AgentSite
from hyperhive.agent.admission import Admission
from hyperhive.agent.enclosure import Enclosure
from hyperhive.agent.events import EventsBus
from hyperhive.agent.lifetime import Lifetime
from hyperhive.agent.spec import AgentSpec
from hyperhive.config import AgentConfig, HiveConfig, HivePaths, parse_agent_config
from hyperhive.permissions import HYPERHIVE_SERVER, Capability, ToolGroup, declaration
from hyperhive.tools.meta import Deployed, DeployedArgs, DeployLogEntry, MetaArgs
from hyperhive.wirebase import AgentMeta


def _spec(home: Path, config: AgentConfig) -> AgentSpec:
    hive = HiveConfig(runtime="unsandboxed", claude_bin="/c")
    return AgentSpec(name="alice", config=config, paths=HivePaths(home), hive=hive)


def test_the_applied_config_is_written_at_activation_and_follows_a_new_config(
    tmp_path: Path,
) -> None:
    spec = _spec(tmp_path, AgentConfig(model="sonnet"))
    enclosure = Enclosure.prepare(spec)
    applied = spec.applied_config_file
    assert applied == tmp_path / "run" / "agent-runtime" / "alice" / "agent.toml"
    assert applied.read_text() == 'model = "sonnet"\n'
    assert applied.stat().st_mode & 0o777 == 0o644

    site = AgentSite(spec, Lifetime(), enclosure, EventsBus(), Admission(), "http://h")
    before = applied.stat().st_ino
    site.respec(spec.placed("queen", ()))  # a new place, the same config: left alone
    assert applied.stat().st_ino == before
    site.respec(_spec(tmp_path, AgentConfig(model="opus", capabilities=[Capability.META_READ])))
    assert parse_agent_config(applied.read_text()) == site.spec.config
    assert applied.stat().st_ino != before  # replaced whole (atomic), never edited in place


def test_get_deployed_reads_as_the_config_then_the_log_newest_first() -> None:
    tool = declaration(HYPERHIVE_SERVER, "get_deployed")
    assert tool is not None and tool.capability is Capability.META_READ
    at = calendar.timegm((2026, 12, 5, 1, 2, 3, 0, 0, 0))
    result = Deployed(
        agent="kid",
        config='model = "opus"\n',
        log=[
            DeployLogEntry(seq=9, at=at + 60, action="apply", message="apply kid abc (by q)"),
            DeployLogEntry(seq=2, at=at, action="import", message="adopt /h/meta"),
        ],
    )
    assert tool.text(DeployedArgs(agent="kid"), result).splitlines() == [
        "== kid's applied agent.toml",
        'model = "opus"',
        "== its deploy log, newest first",
        "#9 2026-12-05T01:03:03Z apply: apply kid abc (by q)",
        "#2 2026-12-05T01:02:03Z import: adopt /h/meta",
    ]
    broken = Deployed(agent="kid", config="", broken="line 1: bad", log=[])
    assert tool.text(DeployedArgs(agent="kid"), broken).splitlines() == [
        "== kid's applied agent.toml (broken: line 1: bad)",
        "(empty: every default)",
        "== its deploy log, newest first",
        "(no entries)",
    ]


def test_get_agent_meta_names_the_applied_config_only_when_it_is_the_callers() -> None:
    tool = declaration(HYPERHIVE_SERVER, "get_agent_meta")
    assert tool is not None and tool.group is ToolGroup.META
    meta = AgentMeta(
        name="alice",
        hive_name="h",
        hyperhive_rev="1",
        running=True,
        status_text="",
        status_set_at=None,
        parent=None,
    )
    other = json.loads(tool.text(MetaArgs(name="bob"), meta))
    assert "applied_config" not in other and "matrix_accounts" not in other
    own = meta.model_copy(update={"applied_config": "/r/alice/agent.toml"})
    assert json.loads(tool.text(MetaArgs(), own))["applied_config"] == "/r/alice/agent.toml"
