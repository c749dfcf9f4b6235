"""The managed settings a choom session gets: the machine's policy plus the hive's denials."""

from __future__ import annotations

import json
from pathlib import Path

from hyperhive.agent.managed import CHOOM_DENY, MANAGED_FILE, choom_policy, prepare_managed_dir


def test_the_denials_join_the_machines_policy_and_keep_the_rest_of_it() -> None:
    assert choom_policy(None) == {"permissions": {"deny": ["Task", "TodoWrite"]}}
    machine = {
        "permissions": {"deny": ["WebFetch", "Task"], "allow": ["Read"]},
        "disableBypassPermissionsMode": "disable",
    }
    merged = choom_policy(machine)
    assert merged["permissions"] == {"deny": ["WebFetch", "Task", "TodoWrite"], "allow": ["Read"]}
    assert merged["disableBypassPermissionsMode"] == "disable"
    assert machine["permissions"] == {"deny": ["WebFetch", "Task"], "allow": ["Read"]}  # pure
    assert "Bash" not in CHOOM_DENY  # the operator's session keeps claude's own shell


def test_the_sessions_dir_copies_the_machines_and_merges_its_settings(tmp_path: Path) -> None:
    machine = tmp_path / "etc-claude-code"
    (machine / "managed-settings.d").mkdir(parents=True)
    (machine / "managed-settings.d" / "10-org.json").write_text('{"model": "opus"}')
    (machine / MANAGED_FILE).write_text(json.dumps({"permissions": {"deny": ["WebSearch"]}}))
    target = tmp_path / "run" / "choom" / "alice" / "claude-code"
    target.mkdir(parents=True)
    (target / "stale.json").write_text("{}")  # a previous session's: gone
    assert prepare_managed_dir(target, machine)
    assert (target / "managed-settings.d" / "10-org.json").read_text() == '{"model": "opus"}'
    assert not (target / "stale.json").exists()
    written = json.loads((target / MANAGED_FILE).read_text())
    assert written == {"permissions": {"deny": ["WebSearch", "Task", "TodoWrite"]}}
    assert (target / MANAGED_FILE).stat().st_mode & 0o777 == 0o644
    # The machine's own copy is never written.
    assert json.loads((machine / MANAGED_FILE).read_text()) == {
        "permissions": {"deny": ["WebSearch"]}
    }
    # Unreadable machine policy: the denials alone.
    (machine / MANAGED_FILE).write_text("{not json")
    assert prepare_managed_dir(target, machine)
    assert json.loads((target / MANAGED_FILE).read_text()) == choom_policy(None)
