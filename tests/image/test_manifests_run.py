"""deploy/k8s's containers run for real: the rendered example overlay under Podman.

No Kubernetes API server can run here, so no scheduler: the test renders the example
overlay (``kubectl kustomize``), fills its placeholder Secrets the way an operator
does (the store URL, the link's certificate, the operator token, each host's
credential from ``hivectl hosts add``), and runs the pods' containers with Podman
exactly as the manifests give them (``tests/support/kube_pods.py``): both coordinator
replicas on a throwaway PostgreSQL, and the hosts rack1 and rack2, each with its own
volume and credential. They share one Podman network (netavark, DNS by name); the
``hyperhive-hostlink`` Service is a network alias of both coordinators, so, as with a
Service, the name reaches whichever one is active (the standby binds no port).
PostgreSQL and the scripted model server run on this machine and are reached at the
network's gateway address.

In it: an agent placed on each host answers (its model requests come from that host's
container), the active coordinator is killed and the standby takes over, and a killed
host's agent shows ``lost`` and comes back when the host's pod runs again.
"""

from __future__ import annotations

import base64
import json
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme
import yaml

from hyperhive.config import AgentConfig, dump_agent_config
from tests.support.deploy import DEPLOY
from tests.support.hive import agent_env
from tests.support.hostlink import credential_from
from tests.support.kube_pods import Obj, PodRunner, find
from tests.support.model_server import ModelServer, text, tool_call
from tests.support.podman import COORDINATOR_IMAGE, HOST_IMAGE, Podman
from tests.support.postgres import PgCluster, start_cluster
from tests.support.procs import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

OVERLAY = DEPLOY / "k8s" / "overlays" / "example"
HOSTS = ("rack1", "rack2")
COORDINATORS = ("coordinator-a", "coordinator-b")
TOKEN = secrets.token_urlsafe(32)
# Bounds, not speed claims: containers on 2 loaded cores.
UP_WITHIN_S = 180
TURN_WITHIN_S = 180


def prefixed(objs: list[Obj], kind: str, prefix: str) -> Obj:
    """The one object of ``kind`` whose (kustomize-hashed) name starts with ``prefix``."""
    [obj] = [o for o in objs if o["kind"] == kind and o["metadata"]["name"].startswith(prefix)]
    return obj


def manifest_images(objs: list[Obj]) -> set[str]:
    """Every image a pod template of ``objs`` names (init containers too)."""
    return {
        c["image"]
        for o in objs
        if o["kind"] in ("Deployment", "StatefulSet")
        for c in [
            *o["spec"]["template"]["spec"].get("initContainers", []),
            *o["spec"]["template"]["spec"]["containers"],
        ]
    }


def set_data(obj: Obj, key: str, value: str | bytes) -> None:
    raw = value.encode() if isinstance(value, str) else value
    if obj["kind"] == "Secret":
        obj["data"][key] = base64.b64encode(raw).decode()
    else:
        obj["data"][key] = raw.decode()


def run_coordinator(objs: list[Obj], pods: PodRunner, pod: str) -> str:
    """A replica of the coordinator's Deployment, reachable by its Services' names."""
    deployment = find(objs, "Deployment", "hyperhive-coordinator")
    aliases = [
        s["metadata"]["name"]
        for s in objs
        if s["kind"] == "Service"
        and s["metadata"]["labels"].get("app.kubernetes.io/component") == "coordinator"
    ]
    return pods.run(deployment["spec"]["template"], pod, aliases=aliases)


@dataclass
class Hive:
    podman: Podman
    pods: PodRunner
    objs: list[Obj]
    network: str
    model: ModelServer
    workdir: Path

    def pod_template(self, kind: str, name: str) -> Obj:
        return find(self.objs, kind, name)

    def run_coordinator(self, pod: str) -> str:
        return run_coordinator(self.objs, self.pods, pod)

    def run_host(self, host: str) -> str:
        sts = self.pod_template("StatefulSet", f"hyperhive-host-{host}")
        return self.pods.run(
            sts["spec"]["template"],
            f"{sts['metadata']['name']}-0",
            claims=sts["spec"]["volumeClaimTemplates"],
        )

    def log(self, pod: str) -> str:
        return self.podman.logs(self.podman.name(pod))

    def active(self) -> str:
        """The coordinator pod whose log says it serves (and that still runs)."""
        up = [
            c
            for c in COORDINATORS
            if self.podman.running(self.podman.name(c)) and "coordinator up" in self.log(c)
        ]
        return up[0] if len(up) == 1 else ""

    def hivectl(self, *args: str) -> str:
        """``hivectl ARGS`` in the active coordinator's container, as an operator runs it."""
        out = self.podman.exec(self.podman.name(self.active()), "hivectl", *args, check=False)
        assert out.returncode == 0, f"hivectl {' '.join(args)}: {out.stderr}\n{self.logs()}"
        return out.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.hivectl(*args, "--json"))

    def agents(self) -> dict[str, dict[str, Any]]:
        return {row["name"]: row for row in self.json("agents", "list")}

    def logs(self) -> str:
        return self.podman.all_logs()

    def wait(self, check: Any, within: float, what: str) -> Any:
        try:
            return wait_until(check, within, what)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.logs()}") from None

    def spawn(self, agent: str, host: str) -> None:
        # The coordinator's /tmp is the pod's emptyDir: the config goes in through it.
        config = dump_agent_config(AgentConfig(env=agent_env(self.model.url)))
        path = self.workdir / self.active() / "tmp" / f"{agent}.toml"
        path.write_text(config)
        path.chmod(0o644)
        self.hivectl("agents", "spawn", agent, "--config", f"/tmp/{agent}.toml", "--host", host)

    def answer(self, agent: str, body: str) -> dict[str, Any]:
        """Send ``agent`` a message and wait for its reply in the operator's inbox."""
        before = {m["id"] for m in self.json("inbox")}
        self.hivectl("send", agent, body)
        [reply] = self.wait(
            lambda: (
                [m for m in self.json("inbox") if m["from"] == agent and m["id"] not in before]
                or None
            ),
            TURN_WITHIN_S,
            f"{agent}'s answer",
        )
        return dict(reply)


@pytest.fixture
def hive(images: str, tmp_path: Path) -> Iterator[Hive]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is missing: scripts/bootstrap --dev installs it"
    rendered = subprocess.run(
        [kubectl, "kustomize", str(OVERLAY)], capture_output=True, text=True, timeout=120
    )
    assert rendered.returncode == 0, rendered.stderr
    objs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    podman = Podman()
    cluster: PgCluster | None = None
    model: ModelServer | None = None
    # Pod directories must be reachable by the coordinator's user (pytest's are 0700).
    workdir = Path(tmp_path / "pods")
    workdir.mkdir()
    for p in (tmp_path, workdir):
        p.chmod(0o755)
    try:
        network, subnet, gateway = podman.network()
        # The manifests' images are the ones scripts/image built, under the overlay's names.
        for image in sorted(manifest_images(objs)):
            podman.tag(COORDINATOR_IMAGE if "coordinator" in image else HOST_IMAGE, image)
        cluster = start_cluster(tcp=True, fsync=False, listen="*", allow=(subnet,))
        db = cluster.create_database("image")
        store_url = cluster.url(db, tcp=True).replace("127.0.0.1", gateway)
        # As an operator makes them: files that end in a newline (`echo … > secrets/…`).
        set_data(prefixed(objs, "Secret", "hyperhive-store-"), "url", store_url + "\n")
        ca = trustme.CA()
        cert = ca.issue_cert("hyperhive-hostlink")
        tls = prefixed(objs, "Secret", "hyperhive-hostlink-tls-")
        set_data(tls, "tls.crt", b"".join(b.bytes() for b in cert.cert_chain_pems))
        set_data(tls, "tls.key", cert.private_key_pem.bytes())
        set_data(
            prefixed(objs, "ConfigMap", "hyperhive-hostlink-ca-"), "ca.crt", ca.cert_pem.bytes()
        )
        set_data(
            prefixed(objs, "Secret", "hyperhive-dashboard-token-"),
            "token",
            TOKEN + "\n",
        )
        set_data(
            prefixed(objs, "Secret", "hyperhive-model-api-"), "ANTHROPIC_API_KEY", "test-key\n"
        )
        pods = PodRunner(podman, objs, workdir, network)
        for pod in COORDINATORS:
            run_coordinator(objs, pods, pod)
        # The bridge (and so the gateway's address) exists once a container is on it.
        model = ModelServer(host=gateway).start()
        hive = Hive(podman, pods, objs, network, model, workdir)
        hive.wait(hive.active, UP_WITHIN_S, "one coordinator active")
        yield hive
    finally:
        try:
            podman.close()
        finally:
            if model is not None:
                model.stop()
            if cluster is not None:
                cluster.destroy()


def test_the_manifests_containers_run_a_hive_that_survives_losing_a_coordinator_and_a_host(
    hive: Hive,
) -> None:
    podman = hive.podman
    first = hive.active()
    [standby] = [c for c in COORDINATORS if c != first]
    hive.wait(lambda: "standing by" in hive.log(standby), UP_WITHIN_S, "the other stands by")
    # Readiness as the manifest probes it: only the active replica answers /healthz.
    probe = hive.pod_template("Deployment", "hyperhive-coordinator")["spec"]["template"]["spec"][
        "containers"
    ][0]["readinessProbe"]["httpGet"]
    ready = httpx.get(
        f"http://{podman.address(podman.name(first), hive.network)}:7878{probe['path']}"
    )
    assert ready.status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.get(
            f"http://{podman.address(podman.name(standby), hive.network)}:7878{probe['path']}"
        )

    # Each host's credential, as `hivectl hosts add NAME` printed it, in its Secret.
    for host in HOSTS:
        credential = credential_from(hive.hivectl("hosts", "add", host))
        secret = prefixed(hive.objs, "Secret", f"hyperhive-host-credential-{host}-")
        set_data(secret, "credential", credential + "\n")
    for host in HOSTS:
        hive.run_host(host)

    def connected() -> bool:
        rows = {h["name"]: h for h in hive.json("hosts", "list")}
        return all(rows.get(h, {}).get("connected") for h in HOSTS)

    hive.wait(connected, UP_WITHIN_S, "both hosts connected")
    # The liveness probe, as the kubelet would run it, passes in each host's container.
    sts = hive.pod_template("StatefulSet", "hyperhive-host-rack1")
    probe_cmd = sts["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["exec"]["command"]
    for host in HOSTS:
        podman.exec(podman.name(f"hyperhive-host-{host}-0"), *probe_cmd)

    hive.model.set_script(
        [
            tool_call("mcp__hyperhive__send", {"to": "operator", "body": "alice on rack1"}),
            text("done"),
            tool_call("mcp__hyperhive__send", {"to": "operator", "body": "bob on rack2"}),
            text("done"),
            tool_call("mcp__hyperhive__send", {"to": "operator", "body": "alice after failover"}),
            text("done"),
            tool_call("mcp__hyperhive__send", {"to": "operator", "body": "alice is back"}),
            text("done"),
        ]
    )
    hive.spawn("alice", "rack1")
    hive.spawn("bob", "rack2")
    hive.wait(
        lambda: all(hive.agents()[a]["running"] for a in ("alice", "bob")), UP_WITHIN_S, "placed"
    )
    rows = hive.agents()
    assert (rows["alice"]["host"], rows["bob"]["host"]) == ("rack1", "rack2")
    assert hive.answer("alice", "who are you?")["body"] == "alice on rack1"
    assert hive.answer("bob", "who are you?")["body"] == "bob on rack2"
    # Each turn's claude ran in its host's container: the model saw that container's address.
    address = {h: podman.address(podman.name(f"hyperhive-host-{h}-0"), hive.network) for h in HOSTS}
    callers = [r.client for r in hive.model.main_requests]
    assert callers == [address["rack1"]] * 2 + [address["rack2"]] * 2, callers

    # The active coordinator dies: the standby takes the lease and serves; the hosts redial
    # the Service's name, which now reaches it.
    podman("kill", "--signal", "KILL", podman.name(first))
    hive.wait(lambda: hive.active() == standby, UP_WITHIN_S, "the standby takes over")
    hive.wait(connected, UP_WITHIN_S, "both hosts redialled the new coordinator")
    assert hive.answer("alice", "still there?")["body"] == "alice after failover"
    # Both replicas got the operator token from its Secret (the init container), so the
    # takeover kept the operator logged in.
    for pod in COORDINATORS:
        token = hive.workdir / pod / "home" / "run" / "dashboard-token"
        assert token.read_text().strip() == TOKEN
    # Kubernetes would restart the killed replica: it comes back as the standby.
    hive.run_coordinator(first)
    hive.wait(lambda: "standing by" in hive.log(first), UP_WITHIN_S, "the old one stands by")

    # A host dies without a goodbye: past its lease its agent is lost, the other host's
    # agent is untouched; its pod runs again (same volume, same credential) and it is back.
    podman("kill", "--signal", "KILL", podman.name("hyperhive-host-rack1-0"))
    hive.wait(lambda: hive.agents()["alice"]["lost_on"] == "rack1", UP_WITHIN_S, "alice lost")
    rows = hive.agents()
    assert not rows["alice"]["running"]
    assert rows["bob"]["running"] and rows["bob"]["host"] == "rack2"
    hive.run_host("rack1")
    hive.wait(
        lambda: hive.agents()["alice"]["running"] and hive.agents()["alice"]["host"] == "rack1",
        UP_WITHIN_S,
        "alice back on rack1",
    )
    assert hive.answer("alice", "back?")["body"] == "alice is back"
    # Its volume kept what it had: the same claude session went on (a resumed history).
    last = hive.model.main_requests[-2]
    assert "who are you?" in json.dumps(last.messages), "alice's session did not survive"
