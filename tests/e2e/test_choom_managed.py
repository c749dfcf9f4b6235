"""hivectl choom under bubblewrap: claude's managed settings deny Task and TodoWrite.

A real ``hivectl serve`` (runtime = "bwrap", as root: the agent has its own
system user) and ``hivectl choom`` exec'ing the real claude CLI into the
agent's sandbox, in ``--print`` mode against the scripted model: the request
shows the tools claude offers. The session's own settings (user, project and
``--settings``) all allow Task; it is still not offered, Bash still is. A
stand-in claude then shows the managed file from inside: read-only.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperhive.agent.managed import MANAGED_DIR, MANAGED_FILE
from hyperhive.config import AgentConfig, HivePaths
from tests.support.hive import agent_env, hivectl_env, seed_home, start_serve
from tests.support.model_server import ModelServer, text
from tests.support.sandboxed import SYSUSER_MARKS, traversable_home

pytestmark = [*SYSUSER_MARKS, pytest.mark.e2e, pytest.mark.timeout(180)]

HIVECTL = [sys.executable, "-m", "hyperhive"]
ALLOW_ALL = {"permissions": {"allow": ["Task", "Agent", "TodoWrite"], "deny": []}}


@pytest.fixture
def home() -> Iterator[Path]:
    with traversable_home("hh-choom-", ["alice"]) as path:
        yield path


def _choom(home: Path, *claude_args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*HIVECTL, "choom", "alice", "--", *claude_args],
        env=hivectl_env(home),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_choom_session_cannot_use_task_or_todowrite_whatever_it_allows(
    home: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    model_server.set_script([text("hello from choom")])
    seed_home(
        home,
        {"alice": AgentConfig(env=agent_env(model_server.url))},
        hive_toml=f'runtime = "bwrap"\nclaude_bin = "{claude_bin}"\ndashboard_port = 0\n',
    )
    serve = start_serve(home)
    try:
        paths = HivePaths(home)
        # The session's own settings, user and project, allow everything.
        for settings in (
            paths.agent_home("alice") / ".claude" / "settings.json",
            paths.agent_work("alice") / ".claude" / "settings.json",
        ):
            settings.parent.mkdir(parents=True, exist_ok=True)
            settings.write_text(json.dumps(ALLOW_ALL))
            settings.chmod(0o644)
        out = _choom(
            home,
            "--print",
            "--output-format",
            "stream-json",
            "--verbose",
            "--settings",
            json.dumps(ALLOW_ALL),
            stdin="hi",
        )
        assert out.returncode == 0, out.stderr
        assert "hello from choom" in out.stdout
        [request] = model_server.main_requests
        offered = set(request.tool_names)
        assert not {"Agent", "Task", "TodoWrite"} & offered, sorted(offered)
        assert {"Bash", "Read", "Edit"} <= offered  # choom's carve-out: claude's own shell
        assert "--settings instead" not in out.stderr  # managed, not the fallback

        # What the sandbox sees at /etc/claude-code: the hive's file, read-only.
        probe = paths.agent_work("alice") / "probe-claude"
        target = MANAGED_DIR / MANAGED_FILE
        probe.write_text(
            f"#!/bin/sh\nid -u\ncat {target}\n"
            f"echo '{{}}' > {target} 2>/dev/null && echo WROTE || echo READONLY\n"
            f"touch {MANAGED_DIR}/more.json 2>/dev/null && echo ADDED || echo NOADD\n"
        )
        probe.chmod(0o755)
        toml = (home / "hive.toml").read_text().replace(str(claude_bin), str(probe))
        (home / "hive.toml").write_text(toml)
        shown = _choom(home)
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert lines[0] != "0"  # the agent's own user, not root
        policy = json.loads("\n".join(lines[1:-2]))
        assert set(policy["permissions"]["deny"]) >= {"Task", "TodoWrite"}
        assert lines[-2:] == ["READONLY", "NOADD"]
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=30)
