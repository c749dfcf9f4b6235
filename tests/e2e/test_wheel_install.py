"""hyperhive installed as a tool, from its wheel, with no checkout around it.

The wheel is built once per session (``python -m build``: the sdist, then the wheel
from the sdist, so both must carry every file the package reads at run time) and
installed into a fresh venv outside the checkout, on Debian's own Python, with the
dependencies uv.lock pins, in a directory the agents' users can reach (0755, not
under /root). From there: ``install-claude``, then ``up`` as root with real
sandboxes, and an agent answers the scripted model.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperhive import __version__
from hyperhive.claudebin import CLAUDE_CODE_VERSION
from tests.e2e.test_up import Up, _finish
from tests.support.model_server import ModelServer, text, tool_call

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).parent / "uv"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# What the package reads from its own directory at run time.
PACKAGE_DATA = (
    "hyperhive/py.typed",
    "hyperhive/agent/prompts/system.md",
    "hyperhive/agent/skills/hive-basics/SKILL.md",
    "hyperhive/core/api/dashboard/static/dashboard.css",
    "hyperhive/core/api/dashboard/static/dashboard.js",
    "hyperhive/core/api/dashboard/templates/base.html",
    "hyperhive/core/api/dashboard/templates/agent.html",
)


def _run(
    argv: list[str | Path], env: dict[str, str] | None = None, cwd: str | Path | None = None
) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=300, env=env, cwd=cwd
    )
    assert out.returncode == 0, f"{argv} exited {out.returncode}: {out.stderr[-2000:]}"
    return out


@pytest.fixture(scope="session")
def scratch() -> Iterator[Path]:
    """A 0755 directory under /tmp (traversable all the way), removed at the end."""
    path = Path(tempfile.mkdtemp(prefix="hh-wheel-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def wheel(scratch: Path) -> Path:
    dist = scratch / "dist"
    _run([sys.executable, "-m", "build", "--outdir", dist, REPO])
    (found,) = dist.glob("hyperhive-*.whl")
    return found


@pytest.fixture(scope="session")
def locked_requirements(scratch: Path) -> Path:
    """The runtime dependencies exactly as uv.lock pins them."""
    out = scratch / "requirements.txt"
    _run(
        [UV, "export", "--frozen", "--no-dev", "--no-emit-project", "--quiet", "-o", out],
        cwd=REPO,
    )
    return out


@pytest.fixture(scope="session")
def venv(scratch: Path, wheel: Path, locked_requirements: Path) -> Path:
    """A fresh venv on Debian's Python with the wheel and its locked dependencies."""
    where = scratch / "venv"
    _run([Path(sys.base_prefix) / "bin" / "python3", "-m", "venv", where])
    python = where / "bin" / "python"
    _run([UV, "pip", "install", "--quiet", "--python", python, "-r", locked_requirements])
    _run([UV, "pip", "install", "--quiet", "--python", python, "--no-deps", wheel])
    return where


def _tool_env(home: Path, bin_dir: Path) -> dict[str, str]:
    """An operator's shell: no checkout, no project venv, no claude on PATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VIRTUAL_ENV", "PYTHON", "HIVE_", "ANTHROPIC_", "CLAUDE_"))
    }
    env.update(PATH=f"{bin_dir}:{SYSTEM_PATH}", HIVE_HOME=str(home))
    return env


def test_the_wheel_and_the_sdist_carry_what_runs(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in PACKAGE_DATA:
        assert path in names, path
    assert not any("__pycache__" in n or n.startswith("tests/") for n in names)
    (sdist,) = wheel.parent.glob("hyperhive-*.tar.gz")  # the wheel was built from it
    assert sdist.stat().st_size > 0


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandboxes' own users need root")
@pytest.mark.xdist_group("sysusers")  # one worker for every test making system users
def test_installed_from_the_wheel_up_runs_a_hive_and_an_agent_answers(
    venv: Path, scratch: Path, model_server: ModelServer
) -> None:
    home = scratch / "hive"
    env = _tool_env(home, venv / "bin")
    hivectl = venv / "bin" / "hivectl"
    version = _run([hivectl, "--version"], env=env, cwd="/").stdout
    assert f"hivectl {__version__}" in version
    assert "claude: not found" in version and "install-claude" in version

    # No claude anywhere: up says how to get one, and starts nothing.
    refused = subprocess.run(
        [hivectl, "up"], env=env, cwd="/", capture_output=True, text=True, timeout=120
    )
    assert refused.returncode != 0 and "hivectl --home" in refused.stderr
    assert "install-claude" in refused.stderr and not (home / "run").exists()

    installed = _run([hivectl, "install-claude"], env=env, cwd="/").stdout
    assert f"claude {CLAUDE_CODE_VERSION} is at {home / 'claude'}" in installed
    version = _run([hivectl, "--version"], env=env, cwd="/").stdout
    assert f"claude {CLAUDE_CODE_VERSION} at {home / 'claude'}" in version

    model_server.set_script(
        [tool_call("mcp__hyperhive__send", {"to": "operator", "body": "hello"}), text("done")]
    )
    (home / "hive.toml").write_text("dashboard_port = 0\n")
    env.update(ANTHROPIC_BASE_URL=model_server.url, ANTHROPIC_API_KEY="test-key")
    running = Up(home, env, argv=[str(hivectl), "up"])
    try:
        running.wait_for(lambda: running.saw("agent queen: up"))
        _run([hivectl, "send", "queen", "are you there?"], env=env, cwd="/")

        def answered() -> bool:
            inbox = _run([hivectl, "inbox"], env=env, cwd="/").stdout
            return "hello" in inbox and "queen" in inbox

        running.wait_for(answered)
        # The agent ran the hive's own claude, in its sandbox, as its own user.
        assert (home / "claude" / "node_modules").is_dir()
        assert "execvp" not in (home / "logs" / "agents" / "queen.log").read_text()
    finally:
        _finish(running)


def test_uv_tool_install_gives_a_working_hivectl(wheel: Path, scratch: Path) -> None:
    tools, bin_dir = scratch / "uv-tools", scratch / "uv-bin"
    env = {
        **_tool_env(scratch / "uv-hive", bin_dir),
        "UV_TOOL_DIR": str(tools),
        "UV_TOOL_BIN_DIR": str(bin_dir),
    }
    python = Path(sys.base_prefix) / "bin" / "python3"
    _run([UV, "tool", "install", "--quiet", "--python", python, wheel], env=env)
    out = _run([bin_dir / "hivectl", "--version"], env=env, cwd="/").stdout
    assert f"hivectl {__version__}" in out
    tools_out = _run([bin_dir / "hivectl", "tools", "--json"], env=env, cwd="/").stdout
    assert '"tools_arg"' in tools_out


def test_pipx_install_gives_a_working_hivectl(wheel: Path, scratch: Path) -> None:
    home, bin_dir = scratch / "pipx-home", scratch / "pipx-bin"
    env = {
        **_tool_env(scratch / "pipx-hive", bin_dir),
        "PIPX_HOME": str(home),
        "PIPX_BIN_DIR": str(bin_dir),
    }
    python = Path(sys.base_prefix) / "bin" / "python3"
    pipx = Path(sys.executable).parent / "pipx"
    _run([pipx, "install", "--python", python, wheel], env=env)
    out = _run([bin_dir / "hivectl", "--version"], env=env, cwd="/").stdout
    assert f"hivectl {__version__}" in out
