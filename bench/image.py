"""The container image beside the same processes bare (``python -m bench.run --only image``).

- ``image.size``: what ``scripts/image`` built, on disk: both targets and the Debian base.
- ``image.cold_start``: ``podman run`` of the coordinator image (a fresh home, SQLite)
  until it logs ``coordinator up``, beside ``hivectl serve`` started bare on a fresh
  home the same way; starts alternate, each a new process on a new home.
- ``image.turn``: one scripted claude turn (operator send → turn_end) with the agent host
  in a container of the host image, beside the same turn with the host bare; the two
  hives side by side, turns alternating. Both unsandboxed: the figure is what the
  container adds, not bubblewrap (``lifecycle.bwrap`` measures that).

Podman runs with this machine's settings (``scripts/image --print-conf``); the images
are built first (quick when nothing changed). The containers of ``image.turn`` use the
host's network, so the host's loopback URLs (the model, its MCP surfaces) stay the same.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from time import perf_counter_ns
from typing import Any

import anyio
from tests.support.model_server import ModelServer, always, text
from tests.support.podman import (
    COORDINATOR_IMAGE,
    HOST_IMAGE,
    Podman,
    build_images,
    podman_session,
)

from bench._hostprocs import host
from bench._procs import serve, wait_up
from bench.lifecycle import _alternate, _Turns
from bench.registry import Context, Latency, Row, Sizes, benchmark
from hyperhive.agent.host import resolve_claude_bin
from hyperhive.config import AgentConfig, HivePaths, dump_agent_config

__all__ = ["cold_start", "sizes", "turn_in_a_container"]

AGENT = "bee"
IN_IMAGE_CLAUDE = "/opt/claude/node_modules/.bin/claude"
COORDINATOR_UID = 10001


@benchmark("image.size")
def sizes(ctx: Context) -> list[Sizes]:
    build_images()
    podman = Podman()
    parts = []
    for label, image in (
        ("coordinator", COORDINATOR_IMAGE),
        ("host", HOST_IMAGE),
        ("Debian base", "localhost/hyperhive-base:latest"),
    ):
        size = podman("image", "inspect", "--format", "{{.Size}}", image).stdout
        parts.append((label, int(size)))
    return [
        Sizes(
            "image sizes (scripts/image)",
            tuple(parts),
            note="the host target carries the claude CLI's npm package (a native binary); "
            "the base is Debian bookworm minbase + python3, git, bubblewrap, tini",
            unit="disk",
        )
    ]


def _fresh_home(parent: Path, owner: int) -> Path:
    home = Path(tempfile.mkdtemp(prefix="hhb-img-", dir=parent))
    (home / "hive.toml").write_text('runtime = "unsandboxed"\ndashboard_port = 0\n')
    for path in (home, home / "hive.toml"):
        os.chown(path, owner, owner)
    return home


def _bare_start(home: Path) -> int:
    log_path = home / "serve.log"
    t0 = perf_counter_ns()
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hyperhive", "serve"],
            env={**os.environ, "HIVE_HOME": str(home)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        wait_up(proc, log_path, timeout=120)
        return perf_counter_ns() - t0
    finally:
        _stop(proc)


def _container_start(podman: Podman, home: Path) -> int:
    """``podman run`` of the coordinator image (its own user, the home bind-mounted)
    until it logs ``coordinator up``; its stderr is the container's."""
    log_path = home / "serve.log"
    name = podman.name(f"start{len(podman.containers)}")
    podman.containers.append(name)
    argv = [
        "podman",
        "run",
        "--rm",
        "--name",
        name,
        "--network",
        "none",
        "--pull",
        "never",
        *podman.owner_label,
        "-v",
        f"{home}:/var/lib/hyperhive",
        COORDINATOR_IMAGE,
        "serve",
    ]
    t0 = perf_counter_ns()
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            argv, env=podman.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log
        )
    try:
        wait_up(proc, log_path, timeout=120)
        return perf_counter_ns() - t0
    finally:
        podman("stop", "-t", "20", name, check=False)
        _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@benchmark("image.cold_start")
def cold_start(ctx: Context) -> list[Row]:
    build_images()
    samples = 3 if ctx.quick else 8
    bare: list[int] = []
    boxed: list[int] = []
    with podman_session() as podman:
        for i in range(samples + 1):  # the first round warms the page cache; dropped
            for which in ("container", "bare") if i % 2 else ("bare", "container"):
                if which == "container":
                    took = _container_start(podman, _fresh_home(ctx.workdir, COORDINATOR_UID))
                else:
                    took = _bare_start(_fresh_home(ctx.workdir, 0))
                if i:
                    (boxed if which == "container" else bare).append(took)
    fig, floor = Latency.of(boxed), Latency.of(bare)
    return [
        Row(
            "coordinator cold start in a container: podman run → 'coordinator up'",
            fig,
            "hivectl serve started bare → 'coordinator up' (same run)",
            floor,
            "",
            f"ratio {fig.p50 / floor.p50:.2f}× p50; a fresh home each (SQLite), network none, "
            "starts alternating; includes podman's own start (runc, cgroupfs, overlay)",
        )
    ]


def _turn_home(parent: Path, model_url: str, claude: str) -> HivePaths:
    home = Path(tempfile.mkdtemp(prefix="hhb-imgturn-", dir=parent))
    paths = HivePaths(home)
    (paths.meta / "agents").mkdir(parents=True)
    config = AgentConfig(
        env={
            "ANTHROPIC_BASE_URL": model_url,
            "ANTHROPIC_API_KEY": "bench-key",
            "CLAUDE_CODE_MAX_RETRIES": "0",
        }
    )
    paths.applied_config(AGENT).write_text(dump_agent_config(config))
    (home / "hive.toml").write_text(
        f'runtime = "unsandboxed"\nclaude_bin = {json.dumps(claude)}\ndashboard_port = 0\n'
    )
    return paths


@contextmanager
def _container_hive(podman: Podman, paths: HivePaths) -> Iterator[dict[str, Any]]:
    """The coordinator bare and the agent host in a host-image container (host network,
    the home bind-mounted at its own path); yields ``run/agent-host.json``."""
    home = str(paths.home)
    info_path = paths.run / "agent-host.json"
    with serve(paths, [AGENT]):
        name = podman.name("turnhost")
        podman.run(
            name,
            [
                "--network",
                "host",
                "--pull",
                "never",
                "-v",
                f"{home}:{home}",
                "-e",
                f"HIVE_HOME={home}",
                HOST_IMAGE,
                "host",
            ],
        )
        try:
            info = _wait_for(lambda: _read_json(info_path), 120, podman, name)
            yield info
        finally:
            podman.remove(name)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        got: dict[str, Any] = json.loads(path.read_text())
        return got
    except (OSError, ValueError):
        return None


def _wait_for(check: Any, within: float, podman: Podman, name: str) -> Any:
    deadline = time.monotonic() + within
    while (value := check()) is None:
        if time.monotonic() > deadline or not podman.running(name):
            raise RuntimeError(f"the host container did not come up:\n{podman.logs(name)}")
        time.sleep(0.05)
    return value


@benchmark("image.turn")
def turn_in_a_container(ctx: Context) -> list[Row]:
    build_images()
    samples = 5 if ctx.quick else 20
    with ModelServer(always(text("done"))) as model, ExitStack() as stack:
        podman = stack.enter_context(podman_session())
        hives: dict[str, tuple[HivePaths, Any]] = {}
        boxed = _turn_home(ctx.workdir, model.url, IN_IMAGE_CLAUDE)
        hives["container"] = (boxed, stack.enter_context(_container_hive(podman, boxed)))
        plain = _turn_home(ctx.workdir, model.url, resolve_claude_bin(None))
        stack.enter_context(serve(plain, [AGENT]))
        _, info = stack.enter_context(host(plain))
        hives["bare"] = (plain, info)
        got: dict[str, _Turns] = anyio.run(_alternate, hives, AGENT, samples)
    rows = []
    for label, pick in (
        ("claude turn, host in a container: host turn_start → turn_end", _Turns.claude_of),
        ("claude turn, host in a container: operator send → turn_end", _Turns.whole_of),
    ):
        fig, floor = Latency.of(pick(got["container"])), Latency.of(pick(got["bare"]))
        rows.append(
            Row(
                label,
                fig,
                "the same turn, host bare (same run)",
                floor,
                "",
                f"ratio {fig.p50 / floor.p50:.2f}× p50 · {fig.p99 / floor.p99:.2f}× p99; both "
                "unsandboxed, the coordinator bare, the scripted model on loopback; turns "
                "alternating, one warm-up turn each dropped",
            )
        )
    return rows
