"""The rendered pods as ``podman run`` options (tests/support/kube_pods.py), read offline.

tests/image runs these options for real; this checks, without Podman, that what the
manifests ask for reaches the options: the users, capabilities, read-only root and
unmasked /proc, the Secret and label values in env and args, the files mounted.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest
import yaml

from tests.support.deploy import DEPLOY
from tests.support.kube_pods import container_argv, container_env, find

OVERLAY = DEPLOY / "k8s" / "overlays" / "example"
MOUNTS = {
    name: f"/src/{name}"
    for name in ("home", "tmp", "config", "hostlink-tls", "dashboard-token", "run")
    + ("credential", "hostlink-ca")
}


@pytest.fixture(scope="module")
def objs() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is missing: scripts/bootstrap --dev installs it"
    out = subprocess.run(
        [kubectl, "kustomize", str(OVERLAY)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]


def test_the_host_pod_runs_as_root_with_six_capabilities_and_an_unmasked_proc(
    objs: list[dict[str, Any]],
) -> None:
    template = find(objs, "StatefulSet", "hyperhive-host-rack1")["spec"]["template"]
    spec = template["spec"]
    [main] = spec["containers"]
    env = container_env(main, objs, template["metadata"]["labels"])
    argv = container_argv(spec, main, env=env, mounts=MOUNTS, image="img")
    assert pairs(argv, "--user") == ["0"]
    assert pairs(argv, "--cap-drop") == ["ALL"]
    assert sorted(pairs(argv, "--cap-add")) == sorted(
        ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"]
    )
    assert set(pairs(argv, "--security-opt")) == {
        "no-new-privileges",
        "unmask=ALL",
        "seccomp=unconfined",
        "apparmor=unconfined",
    }
    assert pairs(argv, "--memory") == ["4g"] and pairs(argv, "--stop-timeout") == ["150"]
    # The label and the Secret reach the environment; $(HIVE_HOST_NAME) is expanded.
    assert "HIVE_HOST_NAME=rack1" in pairs(argv, "--env")
    assert "ANTHROPIC_API_KEY=REPLACE-with-your-model-API-key\n" in pairs(argv, "--env")
    command = argv[argv.index("img") + 1 :]
    assert command[:1] == ["host"] and command[command.index("--name") + 1] == "rack1"
    volumes = pairs(argv, "--volume")
    assert "/src/credential:/run/secrets/hyperhive:ro" in volumes
    assert "/src/config/hive.toml:/var/lib/hyperhive/hive.toml:ro" in volumes


def test_the_coordinator_pod_drops_root_and_everything_and_its_init_copies_the_token(
    objs: list[dict[str, Any]],
) -> None:
    spec = find(objs, "Deployment", "hyperhive-coordinator")["spec"]["template"]["spec"]
    [main] = spec["containers"]
    argv = container_argv(spec, main, env={}, mounts=MOUNTS, image="img")
    assert pairs(argv, "--user") == ["10001:10001"] and pairs(argv, "--group-add") == ["10001"]
    assert "--read-only" in argv and "--read-only-tmpfs=false" in argv
    assert pairs(argv, "--cap-drop") == ["ALL"] and not pairs(argv, "--cap-add")
    assert argv[argv.index("img") + 1 :] == ["serve"]
    [init] = spec["initContainers"]
    argv = container_argv(spec, init, env={}, mounts=MOUNTS, image="img")
    assert pairs(argv, "--entrypoint") == ["/bin/sh"]
    script = argv[argv.index("img") + 1 :]
    assert script[0] == "-c" and "/var/lib/hyperhive/run/dashboard-token" in script[1]
    assert "/src/dashboard-token:/run/secrets/hyperhive-dashboard:ro" in pairs(argv, "--volume")
