"""What scripts/image built: the package, claude and the users each target promises."""

from __future__ import annotations

import json
import tomllib

from tests.support.deploy import DEPLOY, REPO
from tests.support.podman import COORDINATOR_IMAGE, HOST_IMAGE, Podman


def run(podman: Podman, image: str, *argv: str, entrypoint: str | None = None) -> str:
    opts = ["--rm", "--network", "none", "--pull", "never"]
    if entrypoint is not None:
        opts += ["--entrypoint", entrypoint]
    return podman("run", *opts, image, *argv).stdout.strip()


def test_both_targets_run_this_checkouts_hivectl_and_the_host_the_pinned_claude(
    images: str,
) -> None:
    podman = Podman()
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    for image in (COORDINATOR_IMAGE, HOST_IMAGE):
        assert version in run(podman, image, "--version"), image
    # The coordinator drops root and serves by default; the host keeps root (useradd,
    # setpriv) and runs `host`.
    assert run(podman, COORDINATOR_IMAGE, "-u", entrypoint="id") == "10001"
    assert run(podman, HOST_IMAGE, "-u", entrypoint="id") == "0"
    cmds = {
        image: json.loads(
            podman("image", "inspect", "--format", "{{json .Config.Cmd}}", image).stdout
        )
        for image in (COORDINATOR_IMAGE, HOST_IMAGE)
    }
    assert cmds == {COORDINATOR_IMAGE: ["serve"], HOST_IMAGE: ["host"]}
    # claude, where the host's hive.toml looks for it, is package.json's pin.
    pin = json.loads((REPO / "package.json").read_text())["dependencies"][
        "@anthropic-ai/claude-code"
    ]
    claude_bin = tomllib.loads((DEPLOY / "k8s" / "host" / "host-hive.toml").read_text())[
        "claude_bin"
    ]
    assert pin in run(podman, HOST_IMAGE, "--version", entrypoint=claude_bin)
    assert "bubblewrap" in run(podman, HOST_IMAGE, "--version", entrypoint="bwrap")
    # scripts/image printed both sizes.
    assert [line.split()[0] for line in images.splitlines()] == [COORDINATOR_IMAGE, HOST_IMAGE]
