"""The session id an agent's turns resume: saved beneath its state, read back whatever is there."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from hyperhive.agent.session import load_session, save_session
from hyperhive.agent.spec import AgentSpec
from hyperhive.config import AgentConfig, HiveConfig, HivePaths

SID = "0b7c2a4e-1111-4222-8333-444455556666"


def spec_in(home: Path) -> AgentSpec:
    spec = AgentSpec("bob", AgentConfig(), HivePaths(home), HiveConfig())
    spec.state_dir.mkdir(parents=True)
    return spec


def session_file(spec: AgentSpec) -> Path:
    return spec.state_dir / "harness" / "session.json"


def test_a_saved_session_is_read_back_and_a_dropped_one_is_none(tmp_path: Path) -> None:
    spec = spec_in(tmp_path)
    assert load_session(spec) is None  # never saved
    save_session(spec, SID)
    assert load_session(spec) == SID
    assert stat.S_IMODE(session_file(spec).stat().st_mode) == 0o600
    save_session(spec, None)  # claude could not resume it: the next turn starts anew
    assert load_session(spec) is None
    assert json.loads(session_file(spec).read_text()) == {"session_id": None}


@pytest.mark.parametrize(
    "content",
    ["{not json", "[]", '"x"', '{"session_id": 5}', '{"session_id": ""}', "{}"],
)
def test_a_file_that_names_no_session_reads_as_none(tmp_path: Path, content: str) -> None:
    spec = spec_in(tmp_path)
    session_file(spec).parent.mkdir()
    session_file(spec).write_text(content)
    assert load_session(spec) is None
