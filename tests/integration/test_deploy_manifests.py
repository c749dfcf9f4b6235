"""deploy/k8s rendered and validated offline, as CI can: no API server runs here.

`kubectl kustomize` renders the example overlay; `kubernetes-validate --strict` checks
every object against the Kubernetes 1.33 schemas its wheel ships; then the rendered
objects are read for what the schemas cannot see: two coordinators, a NetworkPolicy
that lets hosts reach only the coordinator, every Secret and ConfigMap a pod names
present (with the key it reads), and container commands that hivectl really accepts.
kubectl missing fails these tests (scripts/bootstrap --dev installs it); it never skips.
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperhive.config import STORE_URL_ENV, load_hive_config
from tests.support.deploy import DEPLOY, assert_hivectl_accepts, expand

OVERLAY = DEPLOY / "k8s" / "overlays" / "example"
K8S_VERSION = "1.33.0"
HOSTS = ("rack1", "rack2", "rack3")
PRIVATE = [
    ipaddress.ip_network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "127.0.0.0/8")
]

Obj = dict[str, Any]


@pytest.fixture(scope="module")
def rendered_text() -> str:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is missing: scripts/bootstrap --dev installs it"
    out = subprocess.run(
        [kubectl, "kustomize", str(OVERLAY)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def objs(rendered_text: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all(rendered_text) if d]


def of_kind(objs: list[Obj], kind: str) -> list[Obj]:
    return [o for o in objs if o["kind"] == kind]


def one(objs: list[Obj], kind: str, name: str) -> Obj:
    found = [o for o in of_kind(objs, kind) if o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
    return found[0]


def pod_templates(objs: list[Obj]) -> Iterator[tuple[Obj, Obj]]:
    for o in objs:
        if o["kind"] in ("Deployment", "StatefulSet", "DaemonSet"):
            yield o, o["spec"]["template"]


def containers(pod_spec: Obj) -> list[Obj]:
    return [*pod_spec.get("initContainers", []), *pod_spec["containers"]]


def selects(selector: Obj, labels: dict[str, str]) -> bool:
    assert "matchExpressions" not in selector, "the checks below read matchLabels only"
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", "-k", K8S_VERSION, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_overlay_validates_strictly_against_kubernetes_1_33(
    rendered_text: str, objs: list[Obj], tmp_path: Path
) -> None:
    path = tmp_path / "rendered.yaml"
    path.write_text(rendered_text)
    out = validate(path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("passed for resource") == len(objs), out.stdout
    assert f"against version {K8S_VERSION.rsplit('.', 1)[0]}" in out.stdout

    # The same validator refuses a field the schema does not know (strict is on).
    deployment = one(objs, "Deployment", "hyperhive-coordinator")
    deployment["spec"]["template"]["spec"]["containers"][0]["runAsUsr"] = 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(deployment))
    refused = validate(bad)
    assert refused.returncode != 0 and "runAsUsr" in refused.stdout + refused.stderr


def test_two_coordinators_only_the_active_one_ready(objs: list[Obj]) -> None:
    deployment = one(objs, "Deployment", "hyperhive-coordinator")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    # A rolling update would wait forever for a standby to become Ready.
    assert spec["strategy"]["type"] == "Recreate"
    (main,) = spec["template"]["spec"]["containers"]
    probe = main["readinessProbe"]["httpGet"]
    ports = {p["name"]: p["containerPort"] for p in main["ports"]}
    assert probe["path"] == "/healthz" and ports[probe["port"]] == 7878
    labels = spec["template"]["metadata"]["labels"]
    for name in ("hyperhive-dashboard", "hyperhive-hostlink"):
        service = one(objs, "Service", name)
        assert selects({"matchLabels": service["spec"]["selector"]}, labels)
        (port,) = service["spec"]["ports"]
        assert port["targetPort"] in ports


def test_container_settings_agree_with_the_hive_toml_they_mount(
    objs: list[Obj], tmp_path: Path
) -> None:
    """Each hive.toml a pod mounts loads with hyperhive's own loader, and its ports and
    files are the ones the pod exposes and mounts."""
    for workload, template in pod_templates(objs):
        spec = template["spec"]
        (main,) = spec["containers"]
        mounts = {m["mountPath"]: m for m in main["volumeMounts"]}
        home = Path(next(e["value"] for e in main["env"] if e["name"] == "HIVE_HOME"))
        config_mount = mounts[str(home / "hive.toml")]
        volume = next(v for v in spec["volumes"] if v["name"] == config_mount["name"])
        config_map = one(objs, "ConfigMap", volume["configMap"]["name"])
        text = config_map["data"][config_mount["subPath"]]
        (tmp_path / "hive.toml").write_text(text)
        hive = load_hive_config(tmp_path, env={})
        if workload["kind"] == "Deployment":
            assert hive.bind == "0.0.0.0"  # reachable through the Service
            assert hive.hostlink is not None and hive.hostlink.problem() is None
            port = int(hive.hostlink.listen.rsplit(":", 1)[1])
            ports = {p["name"]: p["containerPort"] for p in main["ports"]}
            assert ports == {"dashboard": hive.dashboard_port, "hostlink": port}
            for key in (hive.hostlink.tls_cert, hive.hostlink.tls_key):
                assert key is not None and any(key.is_relative_to(m) for m in mounts), key
            env = {e["name"]: e for e in main["env"]}
            assert "secretKeyRef" in env[STORE_URL_ENV]["valueFrom"]
            assert "store" not in tomllib.loads(text)  # no URL in a ConfigMap
        else:
            assert hive.runtime == "bwrap" and hive.store is None
            assert hive.claude_bin == "/opt/claude/node_modules/.bin/claude"
            probe = " ".join(main["livenessProbe"]["exec"]["command"])
            assert f"127.0.0.1:{hive.agent_host_port}/healthz" in probe


def test_every_secret_and_config_map_a_pod_names_is_rendered(objs: list[Obj]) -> None:
    data = {(o["kind"], o["metadata"]["name"]): set(o.get("data", {})) for o in objs if "data" in o}
    checked = 0
    for _, template in pod_templates(objs):
        spec = template["spec"]
        for volume in spec.get("volumes", []):
            if "secret" in volume:
                assert ("Secret", volume["secret"]["secretName"]) in data, volume
                checked += 1
            if "configMap" in volume:
                assert ("ConfigMap", volume["configMap"]["name"]) in data, volume
                checked += 1
        for container in containers(spec):
            for env in container.get("env", []):
                for kind, ref in (("Secret", "secretKeyRef"), ("ConfigMap", "configMapKeyRef")):
                    source = env.get("valueFrom", {}).get(ref)
                    if source:
                        keys = data.get((kind, source["name"]))
                        assert keys is not None and source["key"] in keys, env
                        checked += 1
    assert checked >= 12  # 3 volumes + 1 env on each of 3 hosts, 4 on the coordinators


def test_each_host_is_its_own_statefulset_with_only_its_own_credential(
    objs: list[Obj],
) -> None:
    statefulsets = of_kind(objs, "StatefulSet")
    assert len(statefulsets) == len(HOSTS)
    seen: set[str] = set()
    for sts in statefulsets:
        assert sts["spec"]["replicas"] == 1
        template = sts["spec"]["template"]
        host = template["metadata"]["labels"]["hyperhive.dev/host"]
        assert sts["metadata"]["name"] == f"hyperhive-host-{host}"
        spec = template["spec"]
        secrets = [v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v]
        (credential,) = [s for s in secrets if s.startswith("hyperhive-host-credential")]
        assert credential.startswith(f"hyperhive-host-credential-{host}-")
        assert credential not in seen
        seen.add(credential)
        (main,) = spec["containers"]
        name_env = next(e for e in main["env"] if e["name"] == "HIVE_HOST_NAME")
        assert name_env["valueFrom"]["fieldRef"]["fieldPath"] == (
            "metadata.labels['hyperhive.dev/host']"
        )
        # bubblewrap in a pod: a user namespace, and /proc unmasked for bwrap's --proc.
        assert spec["hostUsers"] is False
        assert main["securityContext"]["procMount"] == "Unmasked"
        assert main["securityContext"]["allowPrivilegeEscalation"] is False
        assert "SYS_ADMIN" not in main["securityContext"]["capabilities"].get("add", [])
        # The credential sits outside /etc, /usr and /opt, which sandboxes bind.
        mount = next(m for m in main["volumeMounts"] if m["name"] == "credential")
        assert not mount["mountPath"].startswith(("/etc", "/usr", "/opt"))
        assert main["args"][main["args"].index("--credential-file") + 1].startswith(
            mount["mountPath"] + "/"
        )
    assert sorted(c.split("-")[3] for c in seen) == sorted(HOSTS)


def _policies_for(objs: list[Obj], labels: dict[str, str]) -> list[Obj]:
    return [p for p in of_kind(objs, "NetworkPolicy") if selects(p["spec"]["podSelector"], labels)]


def _labels(objs: list[Obj], kind: str) -> list[dict[str, str]]:
    return [o["spec"]["template"]["metadata"]["labels"] for o in of_kind(objs, kind)]


def _is_dns(peer: Obj) -> bool:
    return peer.get("podSelector", {}).get("matchLabels") == {"k8s-app": "kube-dns"} and peer.get(
        "namespaceSelector", {}
    ).get("matchLabels") == {"kubernetes.io/metadata.name": "kube-system"}


def test_hosts_reach_only_the_coordinator_dns_and_public_https(objs: list[Obj]) -> None:
    (coordinator,) = _labels(objs, "Deployment")
    for host in _labels(objs, "StatefulSet"):
        policies = _policies_for(objs, host)
        assert policies, f"no NetworkPolicy selects host pods {host}"
        assert any("Ingress" in p["spec"]["policyTypes"] for p in policies)
        assert all(not p["spec"].get("ingress") for p in policies)  # hosts open no port
        reached_coordinator = False
        for policy in policies:
            for rule in policy["spec"].get("egress", []):
                assert rule.get("to"), f"{policy['metadata']['name']}: egress to anywhere"
                ports = {(p["protocol"], p["port"]) for p in rule["ports"]}
                for peer in rule["to"]:
                    if "ipBlock" in peer:
                        # The model's API only: public HTTPS, no private range.
                        assert ports == {("TCP", 443)}
                        excepted = [ipaddress.ip_network(n) for n in peer["ipBlock"]["except"]]
                        assert all(any(p.subnet_of(e) for e in excepted) for p in PRIVATE)
                    elif _is_dns(peer):
                        assert ports == {("UDP", 53), ("TCP", 53)}
                    else:
                        assert set(peer) == {"podSelector"}, peer  # this namespace only
                        selector = peer["podSelector"]
                        assert selects(selector, coordinator) and not selects(selector, host)
                        assert ports == {("TCP", 7443)}
                        reached_coordinator = True
        assert reached_coordinator


def test_the_coordinator_reaches_postgresql_and_dns_only(objs: list[Obj]) -> None:
    (coordinator,) = _labels(objs, "Deployment")
    hosts = _labels(objs, "StatefulSet")
    (policy,) = _policies_for(objs, coordinator)
    egress = policy["spec"]["egress"]
    database = [peer for rule in egress for peer in rule["to"] if "ipBlock" in peer]
    assert [p["ipBlock"]["cidr"] for p in database] == ["192.0.2.10/32"]
    for rule in egress:
        for peer in rule["to"]:
            assert "ipBlock" in peer or _is_dns(peer), peer
            if "ipBlock" in peer:
                assert [(p["protocol"], p["port"]) for p in rule["ports"]] == [("TCP", 5432)]
    link = [r for r in policy["spec"]["ingress"] if r.get("from")]
    assert [(p["protocol"], p["port"]) for r in link for p in r["ports"]] == [("TCP", 7443)]
    assert all(selects(link[0]["from"][0]["podSelector"], h) for h in hosts)


def test_container_commands_are_real_hivectl_calls(objs: list[Obj]) -> None:
    called = []
    for _, template in pod_templates(objs):
        labels = template["metadata"]["labels"]
        for container in template["spec"]["containers"]:
            values = {}
            for env in container.get("env", []):
                path = env.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath", "")
                label = path.removeprefix("metadata.labels['").removesuffix("']")
                values[env["name"]] = env.get("value") or labels.get(label, "")
            argv = [expand(a, values) for a in container["args"]]
            assert "command" not in container  # the image's entrypoint: hivectl
            assert_hivectl_accepts(argv)
            called.append(argv[0])
            if argv[0] == "host":
                assert argv[argv.index("--name") + 1] == labels["hyperhive.dev/host"]
                url = argv[argv.index("--coordinator") + 1]
                service = url.removeprefix("wss://").split(":")[0]
                port = int(url.rsplit(":", 1)[1])
                (link,) = one(objs, "Service", service)["spec"]["ports"]
                assert link["port"] == port
    assert sorted(called) == ["host"] * len(HOSTS) + ["serve"]
