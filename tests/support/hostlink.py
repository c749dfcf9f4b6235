"""Remote agent hosts in tests: credentials from the operator socket, links dialled for real."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import trustme

from hyperhive.agent.host import AgentHost
from hyperhive.client import RpcClient
from hyperhive.config import AgentConfig, HivePaths
from hyperhive.core.coordinator import Coordinator
from hyperhive.netlink.dialer import LinkTarget, dial
from hyperhive.protocol import HostCredential, LinkRegisterReq, OpHostsAddReq
from tests.support.hive import (
    SERVE_START_WITHIN_S,
    coordinator,
    hive_config,
    hivectl_env,
    operator,
    seed_home,
)
from tests.support.procs import stop, wait_until


def link_tls(tls_dir: Path, address: str, ca_file: Path | None = None) -> Path:
    """A throwaway CA's certificate for a coordinator's link listening on ``address``:
    its key and chain in ``tls_dir/link.pem`` (0600, as a key should be; hive.toml's
    ``tls_cert`` and ``tls_key`` both name it), the CA's in ``ca_file`` (default
    ``tls_dir/ca.pem``), which a dialling host trusts. Returns the CA file."""
    ca = trustme.CA()
    tls_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    pem = tls_dir / "link.pem"
    ca.issue_cert(address).private_key_and_cert_chain_pem.write_to_path(str(pem))
    pem.chmod(0o600)
    ca_file = ca_file or tls_dir / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return ca_file


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


@asynccontextmanager
async def inprocess_remote_host(
    coord_paths: HivePaths, home: Path, cred: Path, name: str = "h2"
) -> AsyncIterator[AgentHost]:
    """A remote agent host in this process with a home of its own (its own disk),
    dialling the coordinator's network link on loopback."""
    host = AgentHost(
        HivePaths(home),
        hive_config(coord_paths.home),
        remote=LinkTarget(link_url(coord_paths), name, cred),
    )
    async with anyio.create_task_group() as tg:
        await tg.start(host.run)
        try:
            yield host
        finally:
            with anyio.move_on_after(10):
                await host.stop_all(graceful=False)
            tg.cancel_scope.cancel()


# A hive serving the network host link: its coordinator, the operator's connection,
# and ``add(NAME)``: ``hosts add NAME``, as the target that host dials.
Linked = tuple[Coordinator, RpcClient, Callable[[str], Awaitable[LinkTarget]]]


@asynccontextmanager
async def linked_hive(
    home: Path,
    configs: Mapping[str, AgentConfig],
    hive_toml: str,
    store_url: str | None = None,
) -> AsyncIterator[Linked]:
    """A coordinator on ``home`` seeded with ``configs`` and ``hive_toml`` (which must
    configure ``[hostlink]``); credentials go to ``home/creds``."""
    seed_home(home, dict(configs), hive_toml=hive_toml, store_url=store_url)
    async with coordinator(home) as c, operator(c.paths) as op:

        async def add(name: str) -> LinkTarget:
            return LinkTarget(link_url(c.paths), name, await add_host(op, name, home / "creds"))

        yield c, op, add


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
        return self.frames[await self.index(cmd, agent, within)]

    async def index(self, cmd: str, agent: str, within: float = 10) -> int:
        """Where in :attr:`frames` the first ``cmd`` for ``agent`` is (waiting for it):
        what came before it is what the host was told first."""
        with anyio.fail_after(within):
            while True:
                for i, frame in enumerate(self.frames):
                    if frame.get("cmd") == cmd and frame.get("agent") == agent:
                        return i
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
