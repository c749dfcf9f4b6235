"""``hivectl doctor`` against real components: a real sandbox, claude, ports, stores."""

from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from hyperhive.claudebin import CLAUDE_CODE_VERSION
from tests.support.claude_link import linked_claude
from tests.support.synapse import free_port

pytestmark = pytest.mark.timeout(240)

AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="agents' own users need root")


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A temp dir other users can traverse (pytest's own is 0700), as a hive home's must be."""
    path = Path(tempfile.mkdtemp(prefix="hh-doctor-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def doctor(
    home: Path, env: dict[str, str] | None = None, nofile: int | None = None
) -> tuple[int, dict[str, Any]]:
    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    out = subprocess.run(
        [sys.executable, "-m", "hyperhive", "--home", str(home), "doctor", "--json"],
        capture_output=True,
        text=True,
        env=env if env is not None else dict(os.environ),
        timeout=180,
        preexec_fn=limit,
    )
    report = json.loads(out.stdout)
    assert set(report) == {"ok", "home", "checks"}
    for check in report["checks"]:
        assert set(check) == {"name", "status", "detail", "remedy"}
        assert check["status"] in ("ok", "fail", "skip")
        assert (check["remedy"] is not None) == (check["status"] == "fail"), check
    if report["ok"]:
        assert out.returncode == 0, out.stderr
    else:
        assert out.returncode != 0 and "doctor:" in out.stderr and "failed" in out.stderr
    return out.returncode, report


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["checks"]}


def keyed_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HIVE_STORE_URL",)}
    env["ANTHROPIC_API_KEY"] = "sk-test"
    env.update(extra)
    return env


@AS_ROOT
def test_a_ready_machine_passes_every_check(open_dir: Path, claude_bin: Path) -> None:
    home = open_dir / "hive"
    home.mkdir()
    (home / "hive.toml").write_text(f'claude_bin = "{claude_bin}"\ndashboard_port = 0\n')
    code, report = doctor(home, keyed_env())
    checks = by_name(report)
    assert code == 0 and report["ok"], report
    assert "runs as nobody (uid 65534)" in checks["bubblewrap"]["detail"]
    # claude --version ran in a real sandbox as nobody, and said the pinned version.
    assert f"claude {CLAUDE_CODE_VERSION}" in checks["claude"]["detail"]
    assert "in a sandbox as an agent would" in checks["claude"]["detail"]
    assert checks["credentials"]["status"] == "ok"
    assert checks["store"]["status"] == "ok" and "SQLite" in checks["store"]["detail"]
    assert checks["hosts"]["status"] == "skip"  # no hive running: nothing to ask
    assert checks["matrix"]["status"] == "skip" and checks["forge"]["status"] == "skip"


@AS_ROOT
def test_each_broken_thing_fails_its_check_with_a_remedy(open_dir: Path, claude_bin: Path) -> None:
    with ExitStack() as stack:
        broken_things(open_dir, claude_bin, stack)


def broken_things(open_dir: Path, claude_bin: Path, stack: ExitStack) -> None:
    taken = stack.enter_context(socket.socket())
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    nobody_there = free_port()  # nothing listens: a real refused connection
    home = open_dir / "hive"
    home.mkdir()
    claude = stack.enter_context(linked_claude(claude_bin))
    closed = claude.parent
    closed.chmod(0o700)
    (home / "hive.toml").write_text(
        f'claude_bin = "{claude}"\n'
        f"dashboard_port = {port}\n"
        f'store = "postgresql://hive@127.0.0.1:{nobody_there}/hive"\n'
        f'[forge]\nurl = "http://127.0.0.1:{nobody_there}"\n'
    )
    env = keyed_env()
    env.pop("ANTHROPIC_API_KEY")
    env.pop("CLAUDE_CODE_OAUTH_TOKEN", None)
    code, report = doctor(home, env)
    checks = by_name(report)
    assert code != 0 and not report["ok"]
    claude = checks["claude"]
    assert claude["status"] == "fail"
    assert f"{closed} (on the way to it) is mode 0o700" in claude["detail"]
    assert "install-claude" in claude["remedy"]
    dash = checks["dashboard"]
    assert dash["status"] == "fail" and f"127.0.0.1:{port} is taken" in dash["detail"]
    assert "dashboard_port" in dash["remedy"]
    store = checks["store"]
    assert store["status"] == "fail"
    assert f"PostgreSQL at 127.0.0.1:{nobody_there}/hive does not answer" in store["detail"]
    assert "HIVE_STORE_URL" in store["remedy"]
    assert checks["credentials"]["status"] == "fail"
    assert "hivectl login" in checks["credentials"]["remedy"]
    assert checks["forge"]["status"] == "fail"
    assert f"127.0.0.1:{nobody_there}" in checks["forge"]["detail"]
    # What is not broken still passes.
    assert checks["bubblewrap"]["status"] == "ok" and checks["disk"]["status"] == "ok"


def test_a_low_open_files_limit_fails_with_how_to_raise_it(open_dir: Path) -> None:
    home = open_dir / "hive"
    home.mkdir()
    (home / "hive.toml").write_text('runtime = "unsandboxed"\ndashboard_port = 0\n')
    _, report = doctor(home, keyed_env(), nofile=200)
    check = by_name(report)["open files"]
    assert check["status"] == "fail" and "hard limit 200" in check["detail"]
    assert "ulimit -Hn" in check["remedy"] and "LimitNOFILE" in check["remedy"]
    _, report = doctor(home, keyed_env())
    assert by_name(report)["open files"]["status"] == "ok"


@AS_ROOT
def test_a_python_out_of_the_agents_reach_is_named_with_where_to_install(
    open_dir: Path,
) -> None:
    home = open_dir / "hive"
    home.mkdir()
    # This Python seen through a closed directory: what a venv under /root looks like.
    closed = open_dir / "root-like"
    closed.mkdir(mode=0o700)
    closed.chmod(0o700)
    (closed / "venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    out = subprocess.run(
        [
            str(closed / "venv" / "bin" / "python"),
            "-m",
            "hyperhive",
            "--home",
            str(home),
            "doctor",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=keyed_env(),
        timeout=180,
    )
    check = by_name(json.loads(out.stdout))["install"]
    assert out.returncode != 0
    assert check["status"] == "fail" and str(closed) in check["detail"]
    assert "/opt/hyperhive" in check["remedy"]
