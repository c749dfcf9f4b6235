"""The machine's checks: what ``hivectl up`` needs here, none of which needs a running hive.

The sandbox checks run a real bubblewrap sandbox as an unprivileged user
(``nobody``, "other" to the install exactly as an agent's own user is), built
by the same :func:`~hyperhive.agent.bwrap.isolated_argv` the agents' turns use.
"""

from __future__ import annotations

import os
import pwd
import resource
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import httpx

from hyperhive.agent.bwrap import SYSTEM_LINKS, SYSTEM_RO, Isolation, isolated_argv
from hyperhive.agent.isolation import readonly_paths
from hyperhive.agent.launch import DEFAULT_PATH, QUIET_ENV
from hyperhive.agentreach import agent_users, claude_problem, python_problem, sandbox_claude
from hyperhive.claudebin import (
    CLAUDE_CODE_VERSION,
    VERSION_PATTERN,
    find_claude,
    missing_claude_message,
)
from hyperhive.config import HiveConfig, HivePaths
from hyperhive.core.api.dashboard.frontdoor import read_record
from hyperhive.credentials import CREDENTIAL_KEYS, LOGIN_REMEDY, read_credentials
from hyperhive.doctor.model import Check, fail, ok, skip
from hyperhive.fdlimit import fd_advice
from hyperhive.sysusers import home_problem

__all__ = [
    "MIN_FREE_BYTES",
    "check_bubblewrap",
    "check_claude",
    "check_credentials",
    "check_dashboard_port",
    "check_disk",
    "check_home",
    "check_install",
    "check_open_files",
]

# A hive's own writes are small, but claude's sessions and git repos grow with every turn.
MIN_FREE_BYTES = 1 << 30
PROBE_TIMEOUT = 60.0


def _probe_user() -> tuple[int, int] | None:
    """Who a probe runs as: ``nobody`` as root (agents have users of their own), else us."""
    if os.geteuid() != 0:
        return None
    entry = pwd.getpwnam("nobody")
    return entry.pw_uid, entry.pw_gid


def _in_sandbox(argv: Sequence[str], ro: Sequence[Path]) -> subprocess.CompletedProcess[str]:
    """``argv`` under bubblewrap as the probe user, as an agent's processes run."""
    ids = _probe_user()
    with tempfile.TemporaryDirectory(prefix="hivectl-doctor-") as tmp:
        work = Path(tmp)
        if ids is not None:
            os.chown(work, *ids)
        existing = frozenset(
            p for p in (*SYSTEM_RO, *(link for link, _ in SYSTEM_LINKS)) if os.path.lexists(p)
        )
        iso = Isolation(
            agent="doctor",
            uid=ids[0] if ids else None,
            gid=ids[1] if ids else None,
            rw=(work,),
            ro=tuple(ro),
            existing=existing,
        )
        env = {"PATH": DEFAULT_PATH, "HOME": str(work), **QUIET_ENV}
        return subprocess.run(
            isolated_argv(iso, argv, work),
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            env=env,
            cwd="/",
        )


def _tail(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " / ".join(lines[-3:])[:400] or "(no output)"


def check_install(hive: HiveConfig) -> Check:
    name = "install"
    if not agent_users(hive.runtime):
        return ok(name, "agents run as this user, who reaches this Python and package")
    problem = python_problem()
    if problem is not None:
        return fail(name, problem.detail, problem.remedy)
    return ok(name, "the agents' users can run this Python and read the hyperhive package")


def check_home(hive: HiveConfig, paths: HivePaths) -> Check:
    name = "home"
    problem = home_problem(paths.home, hive.runtime)
    if problem is not None:
        return fail(name, problem.split("; ", 1)[0], problem.split("; ", 1)[-1])
    return ok(name, f"{paths.home} (the agents' users reach their directories under it)")


def check_bubblewrap(hive: HiveConfig) -> Check:
    name = "bubblewrap"
    if hive.runtime != "bwrap":
        return skip(name, 'runtime = "unsandboxed" in hive.toml: agents are not sandboxed')
    if shutil.which("bwrap") is None:
        return fail(name, "bwrap is not installed", "install it: `apt install bubblewrap`")
    who = "nobody" if _probe_user() is not None else "this user"
    try:
        out = _in_sandbox(["/bin/sh", "-c", "id -u"], ())
    except (OSError, subprocess.TimeoutExpired) as exc:
        return fail(name, f"bwrap could not be started: {exc}", "see `bwrap --version`")
    ids = _probe_user()
    want = str(ids[0] if ids else os.geteuid())
    if out.returncode != 0 or out.stdout.strip() != want:
        return fail(
            name,
            f"a sandbox as {who} failed (exit {out.returncode}): {_tail(out.stderr)}",
            "bubblewrap needs unprivileged user namespaces (`sysctl "
            "kernel.unprivileged_userns_clone=1`; on Ubuntu also "
            "`kernel.apparmor_restrict_unprivileged_userns=0`); in a container, run it "
            "with user namespaces allowed",
        )
    return ok(name, f"a sandbox runs as {who} (uid {want}), as an agent's processes do")


def check_claude(hive: HiveConfig, home: Path) -> Check:
    name = "claude"
    found, looked = find_claude(hive.claude_bin, home)
    install = f"`hivectl --home {home} install-claude` installs {CLAUDE_CODE_VERSION} there"
    if found is None:
        return fail(name, missing_claude_message(looked, home), install)
    claude = sandbox_claude(found)
    problem = claude_problem(claude, home, agent_users=agent_users(hive.runtime))
    if problem is not None:
        return fail(name, problem.detail, problem.remedy)
    sandboxed = hive.runtime == "bwrap" and shutil.which("bwrap") is not None
    argv = [str(claude), "--version"]
    try:
        if sandboxed:
            out = _in_sandbox(argv, readonly_paths(str(claude)))
        else:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return fail(name, f"{claude} --version did not run: {exc}", install)
    version = VERSION_PATTERN.search(out.stdout)
    where = "in a sandbox as an agent would" if sandboxed else "as this user"
    if out.returncode != 0 or version is None:
        return fail(
            name,
            f"{claude} --version failed {where} (exit {out.returncode}): {_tail(out.stderr)}",
            install,
        )
    if version.group(1) != CLAUDE_CODE_VERSION:
        return fail(
            name,
            f"{claude} is version {version.group(1)}; hyperhive is tested with "
            f"{CLAUDE_CODE_VERSION}",
            f"{install} (or point claude_bin in hive.toml at a claude of that version)",
        )
    return ok(name, f"claude {CLAUDE_CODE_VERSION} at {claude} runs {where}")


def check_credentials(hive: HiveConfig, paths: HivePaths) -> Check:
    name = "credentials"
    from_env = [k for k in CREDENTIAL_KEYS if os.environ.get(k) and k in hive.env_passthrough]
    from_file = sorted(read_credentials(paths))
    if from_file:
        return ok(name, f"{', '.join(from_file)} in {paths.home / 'credentials'}")
    if from_env:
        return ok(name, f"{', '.join(from_env)} in this shell's environment (passed to agents)")
    return fail(
        name,
        f"neither {' nor '.join(CREDENTIAL_KEYS)} is set here, and "
        f"{paths.home / 'credentials'} has none",
        f"export one before `hivectl up`, or {LOGIN_REMEDY}",
    )


def check_dashboard_port(hive: HiveConfig, paths: HivePaths, running: bool) -> Check:
    name = "dashboard"
    record = read_record(paths.run) if running else None
    if record is not None:
        try:
            answer = httpx.get(f"{record.url}/healthz", timeout=10.0)
        except httpx.HTTPError as exc:
            return fail(
                name,
                f"the running hive's dashboard at {record.url} does not answer: {exc}",
                f"see {paths.logs / 'coordinator.log'}",
            )
        busy = f" (port {record.requested_port} was taken: {record.busy})" if record.busy else ""
        if answer.status_code == 200:
            return ok(name, f"serving at {record.url}{busy}")
        return fail(
            name,
            f"{record.url}/healthz answered {answer.status_code}",
            f"see {paths.logs / 'coordinator.log'}",
        )
    port = hive.dashboard_port
    if port == 0:
        return ok(name, "dashboard_port = 0: a free port is picked at start")
    family = socket.AF_INET6 if ":" in hive.bind else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            probe.bind((hive.bind, port))
        except OSError as exc:
            return fail(
                name,
                f"{hive.bind}:{port} is taken ({exc.strerror or exc}); the dashboard would "
                "serve on another free port",
                f"stop what listens there (`ss -ltnp 'sport = :{port}'` names it), or set "
                "dashboard_port in hive.toml to a free port (0: any)",
            )
    return ok(name, f"{hive.bind}:{port} is free")


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_disk(paths: HivePaths) -> Check:
    name = "disk"
    where = _existing(paths.home)
    free = shutil.disk_usage(where).free
    detail = f"{free / (1 << 30):.1f} GiB free on the filesystem of {where}"
    if free < MIN_FREE_BYTES:
        return fail(
            name,
            f"{detail}, under {MIN_FREE_BYTES >> 30} GiB",
            "free space there, or put the hive's home on a larger filesystem (--home)",
        )
    return ok(name, detail)


def check_open_files(agents: int) -> Check:
    name = "open files"
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    advice = fd_advice(agents, soft, hard)
    shown = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    if advice.problem is not None:
        return fail(
            name, f"hard limit {shown}, {agents} agent(s) need {advice.needed}", advice.problem
        )
    return ok(name, f"hard limit {shown}: enough for {agents} agent(s) (about {advice.needed})")
