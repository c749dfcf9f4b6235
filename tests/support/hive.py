"""Start a real coordinator (in-process or as ``hivectl serve``) on a temp home."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from pydantic import JsonValue, TypeAdapter

from hyperhive.client import RpcClient, connect
from hyperhive.config import (
    STORE_URL_ENV,
    AgentConfig,
    HiveConfig,
    HivePaths,
    dump_agent_config,
    load_hive_config,
)
from hyperhive.core.coordinator import Coordinator
from hyperhive.protocol import AgentRequest, HostRequest
from hyperhive.unixsock import is_listening
from tests.support.waits import wait_until

_AGENT = TypeAdapter(AgentRequest)
_HOST = TypeAdapter(HostRequest)


def seed_home(
    home: Path,
    agents: Mapping[str, AgentConfig | str],
    topology: Mapping[str, str | None] | None = None,
    hive_toml: str = "",
    store_url: str | None = None,
) -> HivePaths:
    """Write applied configs, topology.json and hive.toml before a coordinator starts.

    ``store_url`` (a ``postgresql://`` URL, e.g. the ``hive_store_url`` fixture's) puts
    the hive on that database, the way an operator would: the URL in a 0600
    ``store_url_file``; ``None`` leaves the hive on SQLite in its home.
    """
    paths = HivePaths(home)
    (paths.meta / "agents").mkdir(parents=True, exist_ok=True)
    for name, cfg in agents.items():
        text = cfg if isinstance(cfg, str) else dump_agent_config(cfg)
        paths.applied_config(name).write_text(text)
    if topology is not None:
        paths.topology.write_text(json.dumps(dict(topology)))
    if "runtime" not in hive_toml:
        # Most suites test the hive's logic, not isolation: no system users for them.
        hive_toml = 'runtime = "unsandboxed"\n' + hive_toml
    if store_url is not None:
        url_file = home / "store.url"
        url_file.touch(mode=0o600)
        url_file.chmod(0o600)
        url_file.write_text(store_url + "\n")
        hive_toml += 'store_url_file = "store.url"\n'
    (home / "hive.toml").write_text(hive_toml)
    return paths


def hive_config(home: Path) -> HiveConfig:
    """``home``'s hive.toml as an in-process coordinator or host of a test reads it.

    Of the environment only ``HIVE_STORE_URL`` counts (the ``HH_TEST_STORE=postgres``
    switch sets it, ``tests/support/stores.py``); a developer's other ``HIVE_*``
    settings stay out of the tests.
    """
    url = os.environ.get(STORE_URL_ENV)
    return load_hive_config(home, {STORE_URL_ENV: url} if url else {})


def host_config(home: Path) -> HiveConfig:
    """``home``'s hive.toml as an agent host reads it, without the forge's and homeserver's
    admin credentials: a host holds none (issue #14); the coordinator provisions each
    agent's identity and hands the host that agent's own token."""
    hive = hive_config(home)
    update: dict[str, Any] = {}
    if hive.forge is not None:
        update["forge"] = hive.forge.model_copy(update={"admin_token_file": None})
    if hive.matrix is not None:
        update["matrix"] = hive.matrix.model_copy(
            update={"registration_shared_secret_file": None, "admin_token_file": None}
        )
    return hive.model_copy(update=update)


@asynccontextmanager
async def coordinator(home: Path) -> AsyncIterator[Coordinator]:
    """A coordinator serving on ``home`` for the block, then cancelled."""
    paths = HivePaths(home)
    # open(): the store hive.toml names, SQLite in the home or PostgreSQL.
    coord = await Coordinator.open(paths, hive_config(home))
    async with anyio.create_task_group() as tg:
        await tg.start(coord.run)
        try:
            yield coord
        finally:
            tg.cancel_scope.cancel()


async def agent_call(client: RpcClient, cmd: str, **fields: Any) -> JsonValue:
    """Make an agent-socket request from plain fields; the result as wire JSON."""
    return await client.call_raw(_AGENT.validate_python({"cmd": cmd, **fields}))


async def op_call(client: RpcClient, cmd: str, **fields: Any) -> JsonValue:
    """Make an operator-socket request from plain fields; the result as wire JSON."""
    return await client.call_raw(_HOST.validate_python({"cmd": cmd, **fields}))


@asynccontextmanager
async def agent(paths: HivePaths, name: str) -> AsyncIterator[RpcClient]:
    async with connect(paths.agent_sock(name)) as client:
        yield client


@asynccontextmanager
async def operator(paths: HivePaths) -> AsyncIterator[RpcClient]:
    async with connect(paths.host_sock) as client:
        yield client


def hivectl_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["HIVE_HOME"] = str(home)
    return env


# How long a started process (serve, host) may take to listen: a bound, not a speed
# claim. On 2 loaded cores (xdist workers beside other runs) serve on PostgreSQL was
# measured at 25-33 s, on SQLite 14-17 s; the old 20-30 s bounds failed tests.
SERVE_START_WITHIN_S = 90


def start_serve(
    home: Path,
    *,
    wait: bool = True,
    log_name: str = "serve.log",
    argv_prefix: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """``hivectl serve`` as a real process; returns once its sockets listen (``wait``;
    a standby coordinator on PostgreSQL does not listen until it takes over).
    ``argv_prefix`` runs it through something (``ip netns exec NS``, which execs)."""
    log = (home / log_name).open("ab")
    proc = subprocess.Popen(
        [*argv_prefix, sys.executable, "-m", "hyperhive", "serve"],
        env=hivectl_env(home),
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    log.close()
    if not wait:
        return proc
    paths = HivePaths(home)

    def listening() -> bool:
        if is_listening(paths.host_sock) and is_listening(paths.hosts_sock):
            return True
        if proc.poll() is not None:
            tail = (home / log_name).read_text(errors="replace")[-2000:]
            raise RuntimeError(f"hivectl serve exited {proc.returncode}:\n{tail}")
        return False

    try:
        wait_until(listening, SERVE_START_WITHIN_S)
    except TimeoutError:
        proc.kill()
        proc.wait()  # reaped here, not left to warn in whichever test runs next
        raise RuntimeError(f"hivectl serve did not come up in {SERVE_START_WITHIN_S} s") from None
    return proc


def agent_env(model_url: str) -> dict[str, str]:
    """What an agent's claude needs to reach the scripted model server quickly."""
    return {
        "ANTHROPIC_BASE_URL": model_url,
        "ANTHROPIC_API_KEY": "test-key",
        "CLAUDE_CODE_MAX_RETRIES": "0",
    }


@asynccontextmanager
async def running_hive(
    home: Path, claude_bin: Path, runtime: str = "unsandboxed"
) -> AsyncIterator[tuple[Coordinator, Any]]:
    """Coordinator and agent host in-process, on real sockets and a real HTTP port.

    Unsandboxed by default (pytest's tmp dirs are 0700, unreachable to agent
    users); the isolation suites pass ``runtime="bwrap"`` with a traversable home.
    """
    from hyperhive.agent.host import AgentHost

    hive_toml = home / "hive.toml"
    existing = hive_toml.read_text() if hive_toml.exists() else ""
    if "runtime" not in existing:
        existing = f'runtime = "{runtime}"\n{existing}'
    if "claude_bin" not in existing:  # a hive restarted on the same home has it already
        existing = f'claude_bin = "{claude_bin}"\n{existing}'
    hive_toml.write_text(existing)
    paths = HivePaths(home)
    hive = hive_config(home)
    coord = await Coordinator.open(paths, hive)
    host = AgentHost(paths, host_config(home), host_id="test-host")
    async with anyio.create_task_group() as tg:
        await tg.start(coord.run)
        await tg.start(host.run)
        try:
            yield coord, host
        finally:
            with anyio.move_on_after(10):
                await host.stop_all(graceful=False)
            tg.cancel_scope.cancel()


@asynccontextmanager
async def hive_with_idle_host(home: Path, claude_bin: Path) -> AsyncIterator[Coordinator]:
    """A coordinator and a real agent host holding every agent's directories (#14: the
    coordinator reaches config repos and trash only through a host), with every seeded
    agent stopped once placed and its config repo seeded: no turn takes their mail."""
    async with running_hive(home, claude_bin) as (coord, _host), operator(coord.paths) as op:
        from tests.support.surfaces import until

        names = coord.registry.configured()
        await until(
            lambda: (
                set(names) <= set(coord.hostlink.placement)
                and all((coord.paths.agent_config_repo(n) / "agent.toml").exists() for n in names)
            ),
            60,
        )
        for name in names:
            await op_call(op, "agent_kill", agent=name)
        yield coord
