"""Remote agent hosts in tests: credentials from the operator socket, links dialled for real."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from hyperhive.client import RpcClient
from hyperhive.config import HivePaths
from hyperhive.netlink.dialer import LinkTarget, dial
from hyperhive.protocol import HostCredential, LinkRegisterReq, OpHostsAddReq
from tests.support.hive import SERVE_START_WITHIN_S, hivectl_env
from tests.support.procs import stop, wait_until


def write_credential(path: Path, credential: str) -> Path:
    """The credential file as an operator makes it: 0600, this user's."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(credential + "\n")
    return path


async def add_host(op: RpcClient, name: str, directory: Path) -> Path:
    """``hosts add NAME`` over the operator socket; the credential's file."""
    cred: HostCredential = await op.call(OpHostsAddReq(cmd="hosts_add", name=name))
    return write_credential(directory / f"{name}.credential", cred.credential)


def link_url(paths: HivePaths) -> str:
    """The URL the coordinator's network host link listens on (``run/hostlink.json``)."""
    url: str = json.loads((paths.run / "hostlink.json").read_text())["url"]
    return url


@dataclass
class Pushes:
    """Commands the coordinator pushed to a dialled host."""

    frames: list[dict[str, Any]] = field(default_factory=list)
    arrived: anyio.Event = field(default_factory=anyio.Event)

    def __call__(self, frame: dict[str, Any]) -> None:
        self.frames.append(frame)
        self.arrived.set()
        self.arrived = anyio.Event()

    async def activation(self, agent: str, within: float = 10) -> dict[str, Any]:
        return await self.command("activate", agent, within)

    async def command(self, cmd: str, agent: str, within: float = 10) -> dict[str, Any]:
        """The first ``cmd`` pushed for ``agent`` (waiting up to ``within`` seconds)."""
        with anyio.fail_after(within):
            while True:
                for frame in self.frames:
                    if frame.get("cmd") == cmd and frame.get("agent") == agent:
                        return frame
                await self.arrived.wait()


@asynccontextmanager
async def registered(
    target: LinkTarget, pushes: Pushes | None = None, **capacity: int | None
) -> AsyncIterator[RpcClient]:
    """A host link dialled and registered as ``target.name`` (a bare host: no agents run),
    reporting ``capacity`` (``claude_slots``, ``max_agents``)."""
    async with dial(target, on_push=pushes) as link:
        await link.call(LinkRegisterReq(cmd="register", host_id=target.name, **capacity))
        yield link


def start_remote_host(
    home: Path,
    name: str,
    url: str,
    credential: Path,
    ca_file: Path | None = None,
    argv_prefix: Sequence[str] = (),
    run_dir: Path | None = None,
    log_name: str | None = None,
) -> subprocess.Popen[bytes]:
    """``hivectl host --coordinator URL`` as a real process (in a namespace, say);
    returns once its HTTP server listens. Its log is ``<home>/host-NAME.log`` (or
    ``log_name``); ``run_dir``: its own run dir (a second host under one name)."""
    info = (run_dir or HivePaths(home).run / "hosts" / name) / "agent-host.json"
    info.unlink(missing_ok=True)
    argv = [
        *argv_prefix,
        sys.executable,
        "-m",
        "hyperhive",
        "host",
        "--coordinator",
        url,
        "--name",
        name,
        "--credential-file",
        str(credential),
    ]
    if ca_file is not None:
        argv += ["--ca-file", str(ca_file)]
    if run_dir is not None:
        argv += ["--run-dir", str(run_dir)]
    log_path = home / (log_name or f"host-{name}.log")
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            argv, env=hivectl_env(home), stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )

    def up() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(
                f"hivectl host {name} exited {proc.returncode}:\n{log_path.read_text()[-3000:]}"
            )
        try:
            return bool(json.loads(info.read_text()).get("pid") == proc.pid)
        except (OSError, ValueError):
            return False

    try:
        wait_until(up, SERVE_START_WITHIN_S, f"remote host {name} listening")
    except BaseException:
        stop(proc)  # reaped here, not left to warn in whichever test runs next
        raise
    return proc


def credential_from(stdout: str) -> str:
    """The credential line ``hivectl hosts add/rotate`` printed."""
    [line] = [ln for ln in stdout.splitlines() if ln.startswith("hhc1_")]
    return line
