"""A remote host's bad starts, as its operator sees them: one clear line per try on its
console (and log), and it keeps retrying with backoff — real ``hivectl serve`` and
``hivectl host --coordinator`` processes on loopback (plain ws is allowed there)."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperhive.config import AgentConfig, HivePaths
from tests.support.hive import seed_home, start_serve
from tests.support.hostlink import credential_from, start_remote_host, write_credential
from tests.support.procs import agent_rows, hivectl, stop, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    made: list[subprocess.Popen[bytes]] = []
    yield made
    for proc in made:
        stop(proc)


def test_a_coordinator_that_does_not_answer_is_retried_with_the_address(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]], claude_bin: Path
) -> None:
    seed_home(tmp_path, {}, hive_toml=f'claude_bin = "{claude_bin}"\n')
    cred = write_credential(tmp_path / "creds" / "h1", "hhc1_" + "x" * 43)
    url = f"ws://127.0.0.1:{closed_port()}"
    host = start_remote_host(tmp_path, "h1", url, cred)
    procs.append(host)
    log = tmp_path / "host-h1.log"
    wait_until(
        lambda: log.read_text().count(f"cannot reach the coordinator at {url}/hostlink") >= 3,
        60,
        "three tries, each saying where it dialled",
    )
    assert host.poll() is None  # it does not give up
    assert "retrying" in log.read_text()


def test_a_name_already_connected_is_refused_until_that_host_dies_then_it_takes_over(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]], claude_bin: Path
) -> None:
    seed_home(
        tmp_path,
        {"alice": AgentConfig()},
        hive_toml=(
            f'claude_bin = "{claude_bin}"\n[hostlink]\nlisten = "127.0.0.1:0"\nlease_seconds = 30\n'
        ),
    )
    procs.append(start_serve(tmp_path))
    info = HivePaths(tmp_path).run / "hostlink.json"
    url = wait_until(
        lambda: json.loads(info.read_text())["url"] if info.exists() else None,
        30,
        "the host link listening",
    )
    cred = write_credential(
        tmp_path / "creds" / "h1", credential_from(hivectl(tmp_path, "hosts", "add", "h1").stdout)
    )
    first = start_remote_host(tmp_path, "h1", url, cred)
    procs.append(first)
    wait_until(lambda: agent_rows(tmp_path)["alice"]["host"] == "h1", 60, "alice on h1")
    second = start_remote_host(
        tmp_path, "h1", url, cred, run_dir=tmp_path / "second-run", log_name="second.log"
    )
    procs.append(second)
    log = tmp_path / "second.log"
    wait_until(
        lambda: log.read_text().count("already connected") >= 2,
        60,
        "the second h1 refused, and retrying",
    )
    assert "stop the other one or give this one its own name" in log.read_text()
    assert second.poll() is None
    # The first dies (kill -9): its link ends, its lease still holds alice, and the
    # waiting one gets in under the name — it runs nothing, so alice starts on it.
    first.kill()
    first.wait(timeout=30)
    wait_until(
        lambda: "registered with the coordinator" in log.read_text(),
        90,
        "the second h1 registered",
    )
    wait_until(lambda: agent_rows(tmp_path)["alice"]["running"], 60, "alice running again")
    assert agent_rows(tmp_path)["alice"]["host"] == "h1"
