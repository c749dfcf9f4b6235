"""The chaos rig: ``serve`` and ``host`` as processes to ``kill -9``, claude's pids, hive.db reads.

Everything is observed the way an operator could: processes, sockets and the
files under ``HIVE_HOME``. hive.db is only read (``mode=ro``) — the
coordinator stays its sole writer.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hyperhive.config import AgentConfig, HivePaths
from tests.support.hive import agent_env, seed_home, start_serve
from tests.support.procs import log_tail, process_gone, start_host, stop

__all__ = [
    "FULL",
    "ChaosProcs",
    "chaos_wrapper",
    "claude_pids",
    "kill_group",
    "kill_strays",
    "live_claudes",
    "seed_soak_home",
]

FULL = os.environ.get("HIVE_CHAOS_FULL", "") not in ("", "0")
"""The full soak of the issue (``scripts/chaos``); otherwise the bounded CI run."""


def chaos_wrapper(directory: Path, real_claude: Path, record: Path) -> Path:
    """claude behind a wrapper that records ``<pid> <start time>`` and tags its requests.

    ``CLAUDE_CODE_EXTRA_BODY`` puts the pid in every API request body, so the
    model server knows which claude process (one per turn) asked; ``exec``
    keeps the pid, which leads claude's own process group.
    """
    path = directory / "claude-chaos"
    path.write_text(
        "#!/bin/bash\n"
        f'printf "%s %s\\n" "$$" "$EPOCHREALTIME" >> {shlex.quote(str(record))}\n'
        'export CLAUDE_CODE_EXTRA_BODY="{\\"chaos_pid\\": $$}"\n'
        f'exec {shlex.quote(str(real_claude))} "$@"\n'
    )
    path.chmod(0o755)
    return path


def seed_soak_home(
    home: Path,
    agents: Sequence[str],
    model_url: str,
    claude: Path,
    store_url: str | None,
) -> None:
    """The soak's hive: ``agents`` on the scripted model at ``model_url``, claude behind
    ``claude`` (a :func:`chaos_wrapper`), the dashboard on a free port."""
    env = agent_env(model_url)
    seed_home(
        home,
        {a: AgentConfig(env=env) for a in agents},
        hive_toml=f'claude_bin = "{claude}"\ndashboard_port = 0\n',
        store_url=store_url,
    )


def claude_pids(record: Path) -> dict[int, float]:
    """pid → wall-clock start of every claude the wrapper started."""
    try:
        lines = record.read_text().splitlines()
    except FileNotFoundError:
        return {}
    out: dict[int, float] = {}
    for line in lines:
        pid, _, at = line.partition(" ")
        if pid.isdigit() and at:
            out[int(pid)] = float(at)
    return out


def _cwd_under(pid: int, root: Path) -> bool:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd")).is_relative_to(root)
    except OSError:
        return False


def live_claudes(record: Path, home: Path) -> list[int]:
    """Claude processes of this hive still running (cwd in an agent's work dir)."""
    agents = home / "agents"
    return [p for p in claude_pids(record) if not process_gone(p) and _cwd_under(p, agents)]


def kill_group(pid: int) -> bool:
    """SIGKILL the process group ``pid`` leads (claude and bash tasks start their own)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def kill_strays(record: Path, home: Path) -> None:
    """Teardown: claude processes a ``kill -9``ed host left behind (they run in their own
    session; bubblewrap's ``--die-with-parent`` would end them, unsandboxed nothing does),
    and any process still working inside an agent's directory."""
    for pid in live_claudes(record, home):
        kill_group(pid)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _cwd_under(int(entry.name), home / "agents"):
            kill_group(int(entry.name))


@dataclass
class ChaosProcs:
    """``hivectl serve`` and ``hivectl host`` on one home, killed and restarted at will."""

    home: Path
    serve: subprocess.Popen[bytes] | None = None
    host: subprocess.Popen[bytes] | None = None
    serve_kills: int = 0
    host_kills: int = 0

    @property
    def paths(self) -> HivePaths:
        return HivePaths(self.home)

    def start_serve(self) -> None:
        self.serve = start_serve(self.home)

    def start_host(self) -> None:
        self.host = start_host(self.home)

    def start(self) -> None:
        self.start_serve()
        self.start_host()

    def kill9_serve(self) -> None:
        assert self.serve is not None
        self.serve.send_signal(signal.SIGKILL)
        self.serve.wait(timeout=30)
        self.serve_kills += 1

    def kill9_host(self) -> None:
        assert self.host is not None
        self.host.send_signal(signal.SIGKILL)
        self.host.wait(timeout=30)
        self.host_kills += 1

    def stop_gracefully(self) -> tuple[int | None, int | None]:
        """SIGTERM the host (turns finish), then the coordinator; their exit codes."""
        codes: list[int | None] = []
        for proc in (self.host, self.serve):
            if proc is None or proc.poll() is not None:
                codes.append(proc.returncode if proc else None)
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                codes.append(proc.wait(timeout=60))
            except subprocess.TimeoutExpired:
                proc.kill()
                codes.append(proc.wait(timeout=30))
        return codes[0], codes[1]

    def close(self) -> None:
        for proc in (self.host, self.serve):
            if proc is not None:
                stop(proc)

    def logs(self) -> str:
        return (
            f"--- serve.log\n{log_tail(self.home, 'serve.log')}\n"
            f"--- host.log\n{log_tail(self.home)}"
        )
