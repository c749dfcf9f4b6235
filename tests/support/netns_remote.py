"""A coordinator and one agent host with a disk of its own, on separate network stacks.

The coordinator (``hivectl serve``, ``[hostlink]`` on its LAN address with a
trustme certificate) runs in network namespace ``coord``; agent host ``h1``
(``hivectl host --coordinator wss://…``) in ``h1``, with a hive home of its
own. Nothing of an agent placed on h1 is on the coordinator's disk, so every
read or write of it has to travel the host link (#14: no shared disk).
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hyperhive.config import AgentConfig, HivePaths
from hyperhive.core.api.dashboard.security import TOKEN_FILE
from tests.support.hive import agent_env, seed_home, start_serve
from tests.support.hostlink import credential_from, link_tls, start_remote_host, write_credential
from tests.support.model_server import ModelServer
from tests.support.netns import Lan, lan, netns_available
from tests.support.procs import hivectl, stop, wait_until

# The marks of a test module built on this rig.
NETNS_E2E = [
    pytest.mark.e2e,
    pytest.mark.timeout(240),
    pytest.mark.skipif(netns_available() is not None, reason=str(netns_available())),
]


@dataclass
class RemoteHive:
    home: Path
    host_home: Path
    net: Lan
    ca_file: Path
    url: str = ""
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def logs(self) -> str:
        files = [*self.home.glob("*.log"), *self.host_home.glob("*.log")]
        return "\n".join(f"--- {f}\n{f.read_text(errors='replace')[-3000:]}" for f in files)

    def dashboard(self) -> tuple[str, dict[str, str]]:
        record = json.loads((HivePaths(self.home).run / "dashboard.json").read_text())
        token = (HivePaths(self.home).run / TOKEN_FILE).read_text().strip()
        return record["url"].rstrip("/"), {"authorization": f"Bearer {token}"}

    def start_h1(self) -> subprocess.Popen[bytes]:
        """Add host ``h1`` (its credential on h1's disk) and start it in its namespace."""
        made = hivectl(self.home, "hosts", "add", "h1")
        cred = write_credential(self.host_home / "creds" / "h1", credential_from(made.stdout))
        proc = start_remote_host(
            self.host_home, "h1", self.url, cred, self.ca_file, self.net.exec_prefix("h1")
        )
        self.procs.append(proc)
        return proc


@contextmanager
def remote_hive(
    tmp_path: Path, claude_bin: Path, agents: Sequence[str]
) -> Iterator[tuple[RemoteHive, ModelServer]]:
    """The coordinator serving ``agents`` (their turns against the model server it
    yields), h1 not started yet (``start_h1``)."""
    with lan(["coord", "h1"]) as net, ModelServer(host=net.own_address) as model:
        ca_file = link_tls(tmp_path / "coord" / "tls", net.addresses["coord"], tmp_path / "ca.pem")
        home, host_home = tmp_path / "coord", tmp_path / "h1"
        seed_home(
            home,
            {name: AgentConfig(env=agent_env(model.url)) for name in agents},
            hive_toml=(
                # The dashboard on the coordinator's LAN address: the test reaches it there.
                f'claude_bin = "{claude_bin}"\nbind = "{net.addresses["coord"]}"\n'
                f'dashboard_port = 0\n[hostlink]\nlisten = "{net.addresses["coord"]}:0"\n'
                'tls_cert = "tls/link.pem"\ntls_key = "tls/link.pem"\n'
            ),
        )
        host_home.mkdir()
        (host_home / "hive.toml").write_text(
            f'claude_bin = "{claude_bin}"\nruntime = "unsandboxed"\n'
        )
        made = RemoteHive(home, host_home, net, ca_file)
        try:
            made.procs.append(start_serve(home, argv_prefix=net.exec_prefix("coord")))
            info = HivePaths(home).run / "hostlink.json"
            made.url = wait_until(
                lambda: json.loads(info.read_text())["url"] if info.exists() else None,
                30,
                "the host link listening",
            )
            yield made, model
        finally:
            for proc in made.procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in reversed(made.procs):
                stop(proc)
