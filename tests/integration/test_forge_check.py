"""``scripts/forge-check``: skipped without a forge, and its scenario passes against one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support.forgejo_server import FakeForgejo

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "forge-check"


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)


def test_without_a_forge_it_is_skipped_and_says_why() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_FORGE_TEST_")}
    done = _run(env)
    assert done.returncode == 0
    assert "skipped: HIVE_FORGE_TEST_URL is not set" in done.stdout


def test_the_scenario_passes_against_the_scripted_forge_and_cleans_up(tmp_path: Path) -> None:
    with FakeForgejo() as forgejo:
        forgejo.add_org("agents")
        token_file = tmp_path / "admin-token"
        token_file.write_text(forgejo.admin_token)
        token_file.chmod(0o600)
        env = {**os.environ, "HIVE_FORGE_TEST_URL": forgejo.url}
        missing = _run(env)
        assert missing.returncode == 2 and "HIVE_FORGE_TEST_TOKEN_FILE" in missing.stderr
        done = _run({**env, "HIVE_FORGE_TEST_TOKEN_FILE": str(token_file)})
        assert done.returncode == 0, done.stdout + done.stderr
        for step in ("clone: ok", "push branch: ok", "refused: ok", "notifications", "PASSED"):
            assert step in done.stdout
        assert [r for r in forgejo.repos if "hhcheck-" in r] == []
        assert [u for u in forgejo.users if u.startswith("hhcheck-")] == []
        assert forgejo.rejected == []
