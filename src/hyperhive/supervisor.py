"""``hivectl up``: the coordinator and the agent host as supervised processes.

Two processes, not one: a coordinator restart interrupts no turn, and a host
crash costs its turns (they are redelivered) but never the coordinator's
state. The host is restarted after 2 s, with the delay doubling (to a
minute) while it keeps dying quickly. The first Ctrl-C (or SIGTERM, or the
terminal's SIGHUP) stops the host gracefully (every agent finishes its turn),
then the coordinator; a second one kills at once.

Both children die with ``up`` even when it is SIGKILLed (see ``lifeline``),
and a home already held by a running hive is refused before anything starts
(see ``homelock``; ``up`` holds ``run/up.lock``, which ``hivectl down`` signals
through). A failure while starting stops what was started, and so does a
signal: ``down`` right after ``up`` stops it cleanly too.

``say`` prints the lines that stay (the dashboard's URL, an agent coming up);
``status`` is told what ``up`` is waiting for right now ("" once nothing), which
the CLI draws as a progress line on a terminal only.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

from hyperhive.agentreach import refuse_unrunnable
from hyperhive.client import call_once
from hyperhive.config import HiveConfig, HivePaths
from hyperhive.core.dashboard.frontdoor import (
    announce_lines,
    await_record,
    read_token,
    token_required,
)
from hyperhive.credentials import LOGIN_REMEDY
from hyperhive.errors import ConfigError, HiveError
from hyperhive.fdlimit import check_fd_limit
from hyperhive.homelock import HomeLock, refuse_if_held
from hyperhive.lifeline import SUPERVISOR_ENV
from hyperhive.permissions import ToolGroup
from hyperhive.protocol import AgentView, OpAgentsReq, OpSpawnReq, OpStatusReq
from hyperhive.sysusers import home_problem
from hyperhive.unixsock import is_listening

__all__ = ["Supervisor"]

log = logging.getLogger(__name__)

RESTART_DELAY = 2.0
MAX_DELAY = 60.0
STABLE_AFTER = 60.0
STOP_GRACE = 150.0


class Supervisor:
    def __init__(
        self,
        home: Path,
        hive: HiveConfig,
        say: Callable[[str], None],
        status: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.home = home
        self.paths = HivePaths(home)
        self.hive = hive
        self.say = say
        self.status = status
        self.stopping = False
        self.procs: dict[str, Process] = {}
        self.lock = HomeLock(self.paths, "up")

    def _argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "hyperhive", "--home", str(self.home), *args]

    async def _start(self, name: str, *args: str) -> Process:
        self.paths.logs.mkdir(parents=True, exist_ok=True)
        with (self.paths.logs / f"{name}.log").open("ab") as log_file:
            return await anyio.open_process(
                self._argv(*args),
                stdin=None,
                stdout=log_file,
                stderr=log_file,
                start_new_session=True,
                env={**os.environ, SUPERVISOR_ENV: str(os.getpid())},
            )

    def preflight(self) -> None:
        """Refuse before anything is created or started: a held or unreachable home."""
        problem = home_problem(self.home, self.hive.runtime)
        if problem is not None:
            raise ConfigError(problem)
        refuse_if_held(self.paths)  # names a running coordinator's pid, if there is one
        # What the agents run must be there, and in their users' reach: otherwise every
        # turn fails in the sandbox (`bwrap: execvp claude`), a minute apart, unseen.
        refuse_unrunnable(self.hive.claude_bin, self.home, self.hive.runtime)
        self.lock.acquire()  # held until ``run`` returns: `hivectl down` finds us by it

    async def run(self) -> None:
        self.preflight()
        try:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as sigs:
                self.say(f"hyperhive: home {self.home}")
                if await self._bring_up(sigs):
                    await self._supervise(sigs)
            self.status("")
            self.say("hyperhive stopped")
        finally:
            self.lock.release()

    async def _bring_up(self, signals: Any) -> bool:
        """Start the coordinator, the root agent and the dashboard; ``False`` if a signal
        stopped the start (what was started is stopped again)."""
        signalled = False
        try:
            async with anyio.create_task_group() as tg:

                async def stop_on_signal() -> None:
                    nonlocal signalled
                    async for _ in signals:
                        signalled = True
                        self.say("stopping before the hive was up")
                        tg.cancel_scope.cancel()
                        return

                tg.start_soon(stop_on_signal)
                try:
                    await self._start_coordinator()
                    await self._ensure_root()
                    await self._announce(self.procs["coordinator"].pid)
                except BaseException:
                    # Nothing is left running after a failed start (it would hold the home).
                    with anyio.CancelScope(shield=True):
                        await self._stop_coordinator()
                    raise
                tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The start's own error as itself (what failed, said as before), not a group.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        return not signalled

    async def _supervise(self, signals: Any) -> None:
        """Keep both processes up until a signal, then stop them in order."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._keep, "coordinator", "serve")
            tg.start_soon(self._keep, "host", "host")
            tg.start_soon(self._report_agents)
            async for _ in signals:
                break
            self.status("")
            self.say("stopping: agents finish their turns (Ctrl-C again to kill)")
            self.stopping = True
            async with anyio.create_task_group() as stop:
                stop.start_soon(self._stop_host, signals)
            tg.cancel_scope.cancel()
        await self._stop_coordinator()

    async def _start_coordinator(self) -> None:
        coordinator = self.procs["coordinator"] = await self._start("coordinator", "serve")
        log_path = self.paths.logs / "coordinator.log"
        started = log_path.stat().st_size if log_path.exists() else 0
        began = time.monotonic()
        deadline = began + 30
        standing_by = False
        while not is_listening(self.paths.host_sock):
            waited = f"{time.monotonic() - began:.0f}s"
            if standing_by:
                self.status(f"standing by for the active coordinator ({waited})")
            else:
                self.status(
                    f"waiting for the coordinator to answer on {self.paths.host_sock} ({waited})"
                )
            if coordinator.returncode is not None:
                last = _last_line(log_path)
                raise HiveError(
                    f"the coordinator exited with {coordinator.returncode}"
                    + (f": {last}" if last else "")
                    + f" (see {log_path})"
                )
            if not standing_by and (line := _standby_line(log_path, started)):
                # On PostgreSQL another coordinator holds the lease: wait for it, however
                # long, as `hivectl serve` would (Ctrl-C stops the wait).
                standing_by = True
                self.say(f"coordinator {line}")
            if not standing_by and time.monotonic() > deadline:
                raise HiveError(f"the coordinator did not come up within 30 s (see {log_path})")
            await anyio.sleep(0.05)

    async def _stop_coordinator(self) -> None:
        coordinator = self.procs.get("coordinator")
        if coordinator is None or coordinator.returncode is not None:
            return
        coordinator.send_signal(signal.SIGTERM)
        with anyio.move_on_after(20):
            await coordinator.wait()
        if coordinator.returncode is None:
            coordinator.kill()
            await coordinator.wait()

    async def _ensure_root(self) -> None:
        root = self.hive.root_agent
        agents = await call_once(self.paths.host_sock, OpAgentsReq(cmd="agents"))
        if any(a.name == root for a in agents):
            return
        from hyperhive.config import AgentConfig

        config = AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))
        await call_once(self.paths.host_sock, OpSpawnReq(cmd="spawn", name=root, config=config))
        self.say(f"spawned the root manager {root!r}")

    async def _announce(self, coordinator_pid: int) -> None:
        run = self.paths.run
        self.status("waiting for the dashboard to serve")
        record = await await_record(run, coordinator_pid)
        self.status("")
        required = token_required(self.hive.dashboard_auth, self.hive.bind)
        token = read_token(run) if required else None
        for line in announce_lines(record, token, run, time.time()):
            self.say(line)
        # The children inherit this process's hard limit: say now if the hive outgrows it.
        agents: Any = await call_once(self.paths.host_sock, OpAgentsReq(cmd="agents"))
        fd_problem = check_fd_limit(len(agents))
        if fd_problem is not None:
            self.say(f"warning:   {fd_problem}")
        self.say(f"logs:      {self.paths.logs}/coordinator.log, host.log, agents/<name>.log")

    async def _keep(self, name: str, *args: str) -> None:
        """Keep one process alive: restart after 2 s, doubling while it dies quickly."""
        quick_exits = 0
        while not self.stopping:
            proc = self.procs.get(name)
            if proc is None or proc.returncode is not None:
                proc = self.procs[name] = await self._start(name, *args)
            started = time.monotonic()
            code = await proc.wait()
            if self.stopping:
                return
            quick_exits = quick_exits + 1 if time.monotonic() - started < STABLE_AFTER else 1
            delay = min(RESTART_DELAY * 2 ** (quick_exits - 1), MAX_DELAY)
            self.say(
                f"{name} exited ({code}); restarting in {delay:.0f}s "
                f"(see {self.paths.logs / (name + '.log')})"
            )
            await anyio.sleep(delay)

    async def _stop_host(self, signals: Any) -> None:
        host = self.procs.get("host")
        if host is None or host.returncode is not None:
            return
        host.send_signal(signal.SIGTERM)
        async with anyio.create_task_group() as tg:

            async def second_signal() -> None:
                async for _ in signals:
                    self.say("killing the agent host now")
                    host.send_signal(signal.SIGTERM)  # the host's own second-signal path
                    return

            tg.start_soon(second_signal)
            with anyio.move_on_after(STOP_GRACE):
                await host.wait()
            if host.returncode is None:
                os.killpg(host.pid, signal.SIGKILL)
            tg.cancel_scope.cancel()

    async def _report_agents(self) -> None:
        seen: dict[str, str] = {}
        while True:
            try:
                agents = await call_once(self.paths.host_sock, OpAgentsReq(cmd="agents"), within=5)
                hive = await call_once(self.paths.host_sock, OpStatusReq(cmd="status"), within=5)
                self.status(waiting_for(agents, bool(hive.hosts)))
            except HiveError:
                agents = []
                self.status("waiting for the coordinator to answer")
            for a in agents:
                if a.launch_problem and a.running:
                    state = f"cannot run claude: {a.launch_problem}"
                elif a.needs_login and a.running:
                    state = f"needs login: {LOGIN_REMEDY}"
                else:
                    state = "up" if a.running else "down"
                if seen.get(a.name) != state:
                    if seen.get(a.name, "").startswith("needs login") and a.running:
                        state = "up (logged in)"
                    elif seen.get(a.name, "").startswith("cannot run") and a.running:
                        state = "up (claude runs again)"
                    seen[a.name] = state
                    self.say(f"agent {a.name}: {state}")
            await anyio.sleep(1.0)


def waiting_for(agents: list[AgentView], host_connected: bool) -> str:
    """What a running ``up`` waits for ("": nothing): its host, then agents to come up
    (those the operator has not stopped and whose config loads)."""
    if not host_connected:
        return "waiting for the agent host to connect"
    pending = [
        a.name
        for a in agents
        if a.desired_running and not a.running and not a.broken and not a.lost_on
    ]
    if not pending:
        return ""
    shown = ", ".join(pending[:5]) + (f" and {len(pending) - 5} more" if len(pending) > 5 else "")
    return f"waiting for agents to come up: {shown}"


def _standby_line(path: Path, since: int) -> str:
    """The coordinator's "standing by: …" log line written after offset ``since``, if any."""
    try:
        with path.open("rb") as f:
            f.seek(since)
            text = f.read(1 << 20).decode(errors="replace")
    except OSError:
        return ""
    marker = "standing by: "
    found = [ln for ln in text.splitlines() if marker in ln]
    return found[-1][found[-1].index(marker) :][:300] if found else ""


def _last_line(path: Path) -> str:
    """The last non-empty line of a log (why a child exited, usually)."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = [ln for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:500] if lines else ""
