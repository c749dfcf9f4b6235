"""Shell completion for ``hivectl`` (click's): the scripts for bash, zsh and fish, and
the completions themselves, agent names included, asked of the running hive."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperhive.config import AgentConfig
from tests.support.hive import seed_home, start_serve

HIVECTL = Path(sys.executable).parent / "hivectl"  # the entry point the package installs


def complete(env: dict[str, str], home: Path | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
    if home is not None:
        base["HIVE_HOME"] = str(home)
    return subprocess.run(
        [str(HIVECTL)], capture_output=True, text=True, timeout=60, env={**base, **env}
    )


@pytest.mark.parametrize(
    ("shell", "registers"),
    [
        ("bash", "complete -o nosort -F _hivectl_completion hivectl"),
        ("zsh", "#compdef hivectl"),
        ("fish", "complete --no-files --command hivectl"),
    ],
)
def test_the_completion_script_generates_for_each_shell(shell: str, registers: str) -> None:
    out = complete({"_HIVECTL_COMPLETE": f"{shell}_source"})
    assert out.returncode == 0, out.stderr
    assert registers in out.stdout and "_HIVECTL_COMPLETE" in out.stdout


def test_bash_loads_the_script_and_completes_commands(tmp_path: Path) -> None:
    script = complete({"_HIVECTL_COMPLETE": "bash_source"}).stdout
    (tmp_path / "hivectl.bash").write_text(script)
    loaded = subprocess.run(
        ["bash", "-c", f"source {tmp_path / 'hivectl.bash'} && complete -p hivectl"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert loaded.stdout.strip() == "complete -o nosort -F _hivectl_completion hivectl"
    words = complete(
        {"_HIVECTL_COMPLETE": "bash_complete", "COMP_WORDS": "hivectl a", "COMP_CWORD": "1"}
    )
    assert words.stdout.split() == ["plain,activity", "plain,agents", "plain,approvals"]


@pytest.fixture
def hive(tmp_path: Path) -> Iterator[Path]:
    seed_home(
        tmp_path,
        {"alice": AgentConfig(), "alfred": AgentConfig(), "bob": AgentConfig()},
        hive_toml="dashboard_port = 0\n",
    )
    proc = start_serve(tmp_path)
    try:
        yield tmp_path
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_agent_names_complete_from_the_running_hive(hive: Path, tmp_path: Path) -> None:
    def names(words: str, home: Path) -> list[str]:
        cword = str(len(words.split()) - 1)
        env = {"_HIVECTL_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": cword}
        out = complete(env, home)
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    assert names("hivectl send al", hive) == ["plain,alfred", "plain,alice"]
    assert names("hivectl agents set-parent bob --parent a", hive) == [
        "plain,alfred",
        "plain,alice",
    ]
    assert names("hivectl logs b", hive) == ["plain,bob"]
    # No hive on this home: no names, and no error in the shell.
    assert names("hivectl send al", tmp_path / "nothing-here") == []
