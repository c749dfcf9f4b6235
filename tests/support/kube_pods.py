"""Rendered Kubernetes pod templates run as Podman containers, as a kubelet would run them.

No API server runs here, so nothing schedules the pods: a test picks a pod template
of the rendered manifests and :class:`PodRunner` runs it: its init containers to
completion, then its container, with the command, args, env (values, Secret keys,
the pod's labels), volumes (emptyDir, ConfigMap and Secret files with their modes,
``subPath``, the StatefulSet's claim as a named volume) and security context the
manifest gives. :func:`container_argv` is the pure half (a pod spec in, ``podman
run`` options out); :class:`PodRunner` writes the files and starts the containers.

What Kubernetes does and this does not: Services (a test gives the pod network
aliases instead, so the Service's name resolves to every replica: only the active
coordinator listens), NetworkPolicies (not enforced), probes (a test runs them),
restarts (a test restarts a pod by running it again), resource requests.
"""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.deploy import expand
from tests.support.podman import Podman

__all__ = ["Obj", "PodRunner", "container_argv", "container_env", "find", "volume_files"]

Obj = dict[str, Any]

# Kubernetes' securityContext → podman options that have a one-to-one meaning.
_SECCOMP = {"Unconfined": ["--security-opt", "seccomp=unconfined"], "RuntimeDefault": []}
_APPARMOR = {"Unconfined": ["--security-opt", "apparmor=unconfined"], "RuntimeDefault": []}


def find(objs: Sequence[Obj], kind: str, name: str) -> Obj:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
    return found[0]


def _data(obj: Obj) -> dict[str, bytes]:
    """A ConfigMap's or Secret's keys, decoded."""
    if obj["kind"] == "ConfigMap":
        return {k: v.encode() for k, v in obj.get("data", {}).items()}
    out = {k: base64.b64decode(v) for k, v in obj.get("data", {}).items()}
    return out | {k: v.encode() for k, v in obj.get("stringData", {}).items()}


def container_env(container: Obj, objs: Sequence[Obj], labels: Mapping[str, str]) -> dict[str, str]:
    """The container's environment: plain values, Secret and ConfigMap keys, pod labels."""
    env: dict[str, str] = {}
    for item in container.get("env", []):
        source = item.get("valueFrom")
        if source is None:
            env[item["name"]] = expand(item.get("value", ""), env)
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            env[item["name"]] = _data(find(objs, "Secret", ref["name"]))[ref["key"]].decode()
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            env[item["name"]] = _data(find(objs, "ConfigMap", ref["name"]))[ref["key"]].decode()
        elif "fieldRef" in source:
            path = source["fieldRef"]["fieldPath"]
            assert path.startswith("metadata.labels['"), f"fieldRef {path}: not supported here"
            env[item["name"]] = labels[path.removeprefix("metadata.labels['").removesuffix("']")]
        else:
            raise AssertionError(f"env {item['name']}: {source} is not supported here")
    return env


def volume_files(volume: Obj, objs: Sequence[Obj]) -> tuple[dict[str, bytes], int]:
    """The files a ConfigMap or Secret volume shows, and their mode."""
    if "configMap" in volume:
        source = volume["configMap"]
        data = _data(find(objs, "ConfigMap", source["name"]))
    else:
        source = volume["secret"]
        data = _data(find(objs, "Secret", source["secretName"]))
    if "items" in source:
        data = {item["path"]: data[item["key"]] for item in source["items"]}
    return data, int(source.get("defaultMode", 0o644))


def _security(pod_spec: Obj, container: Obj) -> list[str]:
    pod = pod_spec.get("securityContext", {})
    own = container.get("securityContext", {})
    ctx = {**pod, **own}
    args: list[str] = []
    uid, gid = ctx.get("runAsUser"), ctx.get("runAsGroup")
    if uid is not None:
        args += ["--user", f"{uid}:{gid}" if gid is not None else str(uid)]
    if ctx.get("runAsNonRoot"):
        assert uid not in (None, 0), "runAsNonRoot needs a non-zero runAsUser here"
    if "fsGroup" in pod:
        args += ["--group-add", str(pod["fsGroup"])]
    if own.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    if own.get("readOnlyRootFilesystem"):
        # Kubernetes mounts no tmpfs of its own: /tmp is the manifest's emptyDir.
        args += ["--read-only", "--read-only-tmpfs=false"]
    caps = own.get("capabilities", {})
    if "ALL" in caps.get("drop", []):
        args += ["--cap-drop", "ALL"]
    for cap in caps.get("add", []):
        args += ["--cap-add", cap]
    if own.get("procMount") == "Unmasked":
        args += ["--security-opt", "unmask=ALL"]
    args += _SECCOMP[ctx.get("seccompProfile", {}).get("type", "RuntimeDefault")]
    args += _APPARMOR[ctx.get("appArmorProfile", {}).get("type", "RuntimeDefault")]
    return args


def container_argv(
    pod_spec: Obj,
    container: Obj,
    *,
    env: Mapping[str, str],
    mounts: Mapping[str, str],
    image: str,
) -> list[str]:
    """``podman run`` options, image and command for one container of a pod.

    ``mounts`` maps each volume name to a host directory or a podman volume name (a
    ConfigMap's or Secret's files already written there).
    """
    argv = _security(pod_spec, container)
    for name, value in env.items():
        argv += ["--env", f"{name}={value}"]
    for mount in container.get("volumeMounts", []):
        source = mounts[mount["name"]]
        if "subPath" in mount:
            source = f"{source}/{mount['subPath']}"
        options = "ro" if mount.get("readOnly") else "rw"
        argv += ["--volume", f"{source}:{mount['mountPath']}:{options}"]
    limit = container.get("resources", {}).get("limits", {}).get("memory")
    if limit:
        argv += ["--memory", limit.replace("Gi", "g").replace("Mi", "m")]
    grace = pod_spec.get("terminationGracePeriodSeconds")
    if grace is not None:
        argv += ["--stop-timeout", str(grace)]
    if "command" in container:
        # Kubernetes' command replaces the entrypoint; args then follow it.
        argv += ["--entrypoint", container["command"][0]]
    argv.append(image)
    argv += [expand(a, env) for a in container.get("command", [])[1:]]
    argv += [expand(a, env) for a in container.get("args", [])]
    return argv


@dataclass
class PodRunner:
    """Runs pods of ``objs`` (rendered manifests) under ``podman``; files under ``workdir``."""

    podman: Podman
    objs: Sequence[Obj]
    workdir: Path
    network: str
    images: Mapping[str, str] = field(default_factory=dict)  # manifest image → local image

    def _mounts(self, pod: str, pod_spec: Obj) -> dict[str, str]:
        mounts: dict[str, str] = {}
        for volume in pod_spec.get("volumes", []):
            where = self.workdir / pod / volume["name"]
            if "emptyDir" in volume:
                # A fresh directory, 0777 as a kubelet makes it; gone with the pod.
                where.mkdir(parents=True, exist_ok=False)
                where.chmod(0o777)
            elif "configMap" in volume or "secret" in volume:
                files, mode = volume_files(volume, self.objs)
                where.mkdir(parents=True, exist_ok=False)
                where.chmod(0o755)
                group = pod_spec.get("securityContext", {}).get("fsGroup", 0)
                for key, data in files.items():
                    path = where / key
                    path.write_bytes(data)
                    # Secret files are the fsGroup's, as a kubelet makes them.
                    os.chown(path, 0, group)
                    path.chmod(mode)
            elif "persistentVolumeClaim" in volume:
                claim = volume["persistentVolumeClaim"]["claimName"]
                mounts[volume["name"]] = self.podman.volume(f"pvc-{claim}")
                continue
            else:
                raise AssertionError(f"volume {volume['name']}: kind not supported here")
            mounts[volume["name"]] = str(where)
        return mounts

    def run(
        self,
        template: Obj,
        pod: str,
        *,
        aliases: Sequence[str] = (),
        claims: Sequence[Obj] = (),
    ) -> str:
        """Run the pod ``template`` as ``pod``: init containers, then its one container
        (detached, its name returned). ``claims``: a StatefulSet's volumeClaimTemplates,
        one named volume each (kept across a re-run of the same pod)."""
        spec = dict(template["spec"])
        spec["volumes"] = [
            *spec.get("volumes", []),
            *(
                {
                    "name": claim["metadata"]["name"],
                    "persistentVolumeClaim": {"claimName": f"{claim['metadata']['name']}-{pod}"},
                }
                for claim in claims
            ),
        ]
        pod_dir = self.workdir / pod
        if pod_dir.exists():
            shutil.rmtree(pod_dir)  # a re-run is a new pod: fresh emptyDirs
        mounts = self._mounts(pod, spec)
        labels = template["metadata"].get("labels", {})
        for init in spec.get("initContainers", []):
            name = self.podman.name(f"{pod}-{init['name']}")
            argv = container_argv(
                spec,
                init,
                env=container_env(init, self.objs, labels),
                mounts=mounts,
                image=self.images.get(init["image"], init["image"]),
            )
            self.podman.remove(name)
            self.podman.run(name, ["--network", "none", "--pull", "never", *argv], detach=False)
        [main] = spec["containers"]
        name = self.podman.name(pod)
        net = ["--network", self.network, "--hostname", pod]
        for alias in aliases:
            net += ["--network-alias", alias]
        argv = container_argv(
            spec,
            main,
            env=container_env(main, self.objs, labels),
            mounts=mounts,
            image=self.images.get(main["image"], main["image"]),
        )
        self.podman.remove(name)
        self.podman.run(name, [*net, "--pull", "never", *argv])
        return name
