"""deploy/systemd's units started for real: systemd as PID 1 in Podman containers.

Two "machines" on one Podman network, each a container running Debian's systemd
(``--systemd=always``) with hyperhive laid out as the units expect
(``tests/image/systemd.Containerfile``): on one, ``hyperhive-coordinator.service``
with its store URL and the link's key given by ``LoadCredential=`` and the example
``coordinator.hive.toml``, on a throwaway PostgreSQL reached at the network's
gateway; on the other, ``hyperhive-host@rack2.service`` with its credential by
``LoadCredential=`` and the example ``host.hive.toml``. Both units reach ``active``
and an agent placed on rack2 answers the scripted model, its claude running in the
host machine under bubblewrap as its own user.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import trustme

from hyperhive.config import AgentConfig, dump_agent_config
from tests.support.deploy import DEPLOY, REPO
from tests.support.hive import agent_env
from tests.support.hostlink import credential_from
from tests.support.model_server import ModelServer, text, tool_call
from tests.support.podman import Podman
from tests.support.postgres import PgCluster, start_cluster
from tests.support.procs import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

UNITS = DEPLOY / "systemd"
IMAGE = "localhost/hyperhive-systemd-test:latest"
HOME = "/var/lib/hyperhive"
UP_WITHIN_S = 180
COORDINATOR_UNIT = "hyperhive-coordinator.service"
HOST_UNIT = "hyperhive-host@rack2.service"


def build_systemd_image(podman: Podman) -> None:
    """The units' test machine (apt-get installs Debian's systemd: the build needs the
    network to Debian's mirror, hence ``--network host``; cached by its layers)."""
    podman(
        "build",
        "--quiet",
        "--layers",
        "--pull=never",
        "--network",
        "host",
        "-f",
        str(REPO / "tests" / "image" / "systemd.Containerfile"),
        "-t",
        IMAGE,
        str(UNITS),
        timeout=900,
    )


@dataclass
class Machines:
    podman: Podman
    coordinator: str
    host: str
    network: str
    model: ModelServer
    store_url: str

    def sh(self, machine: str, script: str, check: bool = True) -> str:
        out = self.podman.exec(machine, "sh", "-c", script, check=False)
        assert not check or out.returncode == 0, f"{script}: {out.stderr}\n{self.journals()}"
        return out.stdout

    def hivectl(self, *args: str) -> str:
        """``hivectl`` on the coordinator's machine, as its operator (root) runs it."""
        return self.sh(
            self.coordinator, f"/opt/hyperhive/bin/hivectl --home {HOME} {' '.join(args)}"
        )

    def active(self, machine: str, unit: str) -> bool:
        return self.sh(machine, f"systemctl is-active {unit}", check=False).strip() == "active"

    def journal(self, machine: str, unit: str) -> str:
        return self.sh(machine, f"journalctl -u '{unit}' --no-pager -o cat", check=False)

    def journals(self) -> str:
        return "\n".join(
            f"--- {unit}\n{self.journal(m, unit)[-3000:]}"
            for m, unit in ((self.coordinator, COORDINATOR_UNIT), (self.host, HOST_UNIT))
        )

    def wait(self, check: Any, what: str) -> Any:
        try:
            return wait_until(check, UP_WITHIN_S, what)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.journals()}") from None


def boot(podman: Podman, name: str, network: str, *extra: str) -> str:
    """A container with systemd as PID 1, running (or degraded: no unit of ours yet)."""
    machine = podman.name(name)
    podman.run(
        machine,
        ["--network", network, "--hostname", machine, "--systemd=always", *extra]
        + ["--pull", "never", IMAGE],
    )

    def up() -> bool:
        state = podman.exec(machine, "systemctl", "is-system-running", check=False).stdout
        return state.strip() in ("running", "degraded")

    wait_until(up, UP_WITHIN_S, f"systemd running in {name}")
    return machine


@pytest.fixture
def machines(images: str) -> Iterator[Machines]:
    podman = Podman()
    cluster: PgCluster | None = None
    model: ModelServer | None = None
    try:
        build_systemd_image(podman)
        network, subnet, gateway = podman.network()
        cluster = start_cluster(tcp=True, fsync=False, listen="*", allow=(subnet,))
        db = cluster.create_database("units")
        store_url = cluster.url(db, tcp=True).replace("127.0.0.1", gateway)
        coordinator = boot(podman, "coordinator", network)
        # bubblewrap mounts a fresh /proc, which the kernel refuses over a masked one.
        host = boot(podman, "rack2", network, "--security-opt", "unmask=ALL")
        model = ModelServer(host=gateway).start()
        yield Machines(podman, coordinator, host, network, model, store_url)
    finally:
        try:
            podman.close()
        finally:
            if model is not None:
                model.stop()
            if cluster is not None:
                cluster.destroy()


def test_the_units_start_under_systemd_with_their_credentials_and_an_agent_answers(
    machines: Machines,
) -> None:
    podman, coordinator, host = machines.podman, machines.coordinator, machines.host
    ca = trustme.CA()
    cert = ca.issue_cert(coordinator)  # the name the host dials
    # The coordinator's machine, as the unit's comment says: root-only credentials, the
    # certificate chain, the example hive.toml in the state directory.
    podman.put(coordinator, "/etc/hyperhive/store.url", machines.store_url + "\n")
    podman.put(coordinator, "/etc/hyperhive/tls/hostlink.key", cert.private_key_pem.bytes())
    chain = b"".join(b.bytes() for b in cert.cert_chain_pems)
    podman.put(coordinator, "/etc/hyperhive/tls/hostlink.pem", chain, mode=0o644)
    machines.sh(coordinator, f"install -d -o hyperhive -g hyperhive -m 0700 {HOME}")
    podman.put(
        coordinator,
        f"{HOME}/hive.toml",
        (UNITS / "coordinator.hive.toml").read_text(),
        owner="hyperhive",
    )
    machines.sh(coordinator, f"systemctl start {COORDINATOR_UNIT}")
    machines.wait(
        lambda: (
            machines.active(coordinator, COORDINATOR_UNIT)
            and "coordinator up" in machines.journal(coordinator, COORDINATOR_UNIT)
        ),
        "the coordinator unit active and serving",
    )
    # It read the store URL through its credential (nothing else names the database),
    # which only the unit's user can read.
    journal = machines.journal(coordinator, COORDINATOR_UNIT)
    assert "postgres" in journal.lower(), journal[-2000:]
    acl = machines.sh(
        coordinator, "getfacl -c /run/credentials/hyperhive-coordinator.service/store.url"
    ).split()
    assert {"user::r--", "user:hyperhive:r--", "group::---", "other::---"} <= set(acl), acl

    credential = credential_from(machines.hivectl("hosts", "add", "rack2"))
    podman.put(host, "/etc/hyperhive/host-rack2.credential", credential + "\n")
    podman.put(
        host,
        "/etc/hyperhive/coordinator.env",
        f"HIVE_COORDINATOR=wss://{coordinator}:7443\nANTHROPIC_API_KEY=test-key\n",
    )
    podman.put(host, "/etc/hyperhive/hostlink-ca.pem", ca.cert_pem.bytes(), mode=0o644)
    machines.sh(host, f"install -d -m 0711 {HOME}")
    podman.put(host, f"{HOME}/hive.toml", (UNITS / "host.hive.toml").read_text(), mode=0o644)
    machines.sh(host, f"systemctl start {HOST_UNIT}")

    def connected() -> bool:
        rows = json.loads(machines.hivectl("hosts", "list", "--json"))
        return any(h["name"] == "rack2" and h["connected"] for h in rows)

    machines.wait(lambda: machines.active(host, HOST_UNIT) and connected(), "rack2 connected")

    machines.model.set_script(
        [
            tool_call("mcp__hyperhive__send", {"to": "operator", "body": "alice under systemd"}),
            text("done"),
        ]
    )
    config = dump_agent_config(AgentConfig(env=agent_env(machines.model.url)))
    podman.put(coordinator, "/tmp/alice.toml", config, mode=0o644)
    machines.hivectl("agents", "spawn", "alice", "--config", "/tmp/alice.toml", "--host", "rack2")
    machines.hivectl("send", "alice", "hello")

    def answered() -> list[dict[str, Any]]:
        inbox = json.loads(machines.hivectl("inbox", "--json"))
        return [m for m in inbox if m["from"] == "alice"]

    [reply] = machines.wait(answered, "alice's answer")
    assert reply["body"] == "alice under systemd"
    # Her claude ran on the host's machine (the model saw its address), as her own user.
    address = podman.address(host, machines.network)
    assert [r.client for r in machines.model.main_requests] == [address] * 2
    users = machines.sh(host, "getent passwd | cut -d: -f1")
    assert any("alice" in u for u in users.split()), users
    # A clean stop: the host says goodbye, so the coordinator shows no lost agent.
    machines.sh(host, f"systemctl stop {HOST_UNIT}")
    assert not machines.active(host, HOST_UNIT)
    rows = {a["name"]: a for a in json.loads(machines.hivectl("agents", "list", "--json"))}
    assert not rows["alice"]["running"] and not rows["alice"]["lost_on"], rows["alice"]
