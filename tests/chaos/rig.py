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
from tests.support.procs import log_tail, start_host, stop

__all__ = [
    "FULL",
    "ChaosProcs",
    "chaos_wrapper",
    "Spawn",
    "claude_starts",
    "kill_group",
    "kill_strays",
    "live_claudes",
    "seed_soak_home",
]

FULL = os.environ.get("HIVE_CHAOS_FULL", "") not in ("", "0")
"""The full soak of the issue (``scripts/chaos``); otherwise the bounded CI run."""


def chaos_wrapper(directory: Path, real_claude: Path, record: Path) -> Path:
    """claude behind a wrapper that records each start and tags its requests.

    A pid alone does not name a claude: on a busy machine pids wrap within a
    soak (``pid_max`` is 32768 here), and a later claude reusing a pid would be
    taken for the earlier one. So a claude is named by its pid and its start
    time in clock ticks (``/proc/<pid>/stat`` field 22), which the wrapper
    records as ``<pid> <wall-clock start> <ticks>``; ``CLAUDE_CODE_EXTRA_BODY``
    puts that name in every API request body, so the model server knows which
    claude process (one per turn) asked. ``exec`` keeps the pid (and the start
    time), which leads claude's own process group.
    """
    path = directory / "claude-chaos"
    path.write_text(
        "#!/bin/bash\n"
        "start=$EPOCHREALTIME\n"
        "read -r stat < /proc/$$/stat\n"
        'read -ra fields <<< "${stat##*) }"\n'
        "ticks=${fields[19]}\n"
        f'printf "%s %s %s\\n" "$$" "$start" "$ticks" >> {shlex.quote(str(record))}\n'
        'export CLAUDE_CODE_EXTRA_BODY="{\\"chaos_claude\\": \\"$$:$ticks\\"}"\n'
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


@dataclass(frozen=True)
class Spawn:
    """One claude the wrapper started: ``key`` (``<pid>:<ticks>``) names it for good."""

    pid: int
    at: float  # wall clock, the coordinator's (one machine)
    ticks: str

    @property
    def key(self) -> str:
        return f"{self.pid}:{self.ticks}"


def claude_starts(record: Path) -> dict[str, Spawn]:
    """Every claude the wrapper started, by its key (a reused pid is another key)."""
    try:
        lines = record.read_text().splitlines()
    except FileNotFoundError:
        return {}
    out: dict[str, Spawn] = {}
    for line in lines:
        fields = line.split()
        if len(fields) == 3 and fields[0].isdigit() and fields[2].isdigit():
            spawn = Spawn(int(fields[0]), float(fields[1]), fields[2])
            out[spawn.key] = spawn
    return out


def _start_ticks(pid: int) -> str | None:
    """The start time of the live process ``pid`` (None if gone or a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def _cwd_under(pid: int, root: Path) -> bool:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd")).is_relative_to(root)
    except OSError:
        return False


def live_claudes(record: Path, home: Path) -> list[int]:
    """Claude processes of this hive still running (cwd in an agent's work dir).

    Matched by start time too: a pid the wrapper once recorded may now be
    someone else's (a bash task's, in the very same work dir)."""
    agents = home / "agents"
    return [
        s.pid
        for s in claude_starts(record).values()
        if _start_ticks(s.pid) == s.ticks and _cwd_under(s.pid, agents)
    ]


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
