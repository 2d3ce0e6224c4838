"""CRI-shaped containers written straight into a real containerd, running by default.

What containerd's CRI plugin would keep for a pod: a sandbox (pause) container carrying the
pod's labels, with the pod's annotations in its OCI spec, and workload containers carrying
the kubelet's `io.kubernetes.*` labels, with env and annotations in their OCI specs. As a
kubelet leaves them, the sandbox is ready and the containers run: each record gets a real
task (`/bin/sleep 3600` from busybox-static, see `containerd_tasks`). `running=False` writes
the record alone (a container that was created but never started, or whose task is gone);
`stop` ends a task and keeps the record, as after a pod was deleted. No image or snapshot is
needed. Uses the processor's own generated stubs (`_proto/containers_pb2.py`).
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from tests.peers import containerd_tasks

pb: Any = importlib.import_module("otelgpu.processors.container_env._proto.containers_pb2")

NAMESPACE = "k8s.io"
OCI_SPEC_TYPE = "types.containerd.io/opencontainers/runtime-spec/1/Spec"
CREATE = "/containerd.services.containers.v1.Containers/Create"
UPDATE = "/containerd.services.containers.v1.Containers/Update"


def container_id(name: str) -> str:
    """A 64-hex ID derived from a readable name, shaped like the IDs CRI generates."""
    return hashlib.sha256(name.encode()).hexdigest()


@dataclass
class Pod:
    """A pod to write: its sandbox and its containers (name → env)."""

    namespace: str
    name: str
    uid: str = "uid-0"
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    # The kubelet's sandbox attempt: a pod whose sandbox died gets a new one, same UID.
    attempt: int = 0

    @property
    def _key(self) -> str:
        suffix = f"/{self.attempt}" if self.attempt else ""
        return f"{self.namespace}/{self.name}/{self.uid}{suffix}"

    @property
    def sandbox_id(self) -> str:
        return container_id(f"sandbox/{self._key}")

    def container_id(self, container: str) -> str:
        return container_id(f"container/{self._key}/{container}")


def _spec(env: Mapping[str, str], annotations: Mapping[str, str], cgroups_path: str) -> bytes:
    """A minimal OCI spec runc can start: sleep from the read-only busybox rootfs."""
    return json.dumps(
        {
            "ociVersion": "1.0.2-dev",
            "process": {
                "args": containerd_tasks.SLEEP_ARGS,
                "cwd": "/",
                "user": {"uid": 0, "gid": 0},
                "env": [f"{k}={v}" for k, v in env.items()],
            },
            "root": {"path": "rootfs", "readonly": True},
            # runc makes device nodes under /dev (a tmpfs: the rootfs is read-only) and
            # reads /proc/self/fd while it starts the process.
            "mounts": [
                {"destination": "/proc", "type": "proc", "source": "proc"},
                {
                    "destination": "/dev",
                    "type": "tmpfs",
                    "source": "tmpfs",
                    "options": ["nosuid", "mode=755"],
                },
            ],
            "annotations": dict(annotations),
            "linux": {
                "namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount")],
                "cgroupsPath": cgroups_path,
            },
        }
    ).encode()


def create_record(
    socket: Path,
    id: str,
    labels: Mapping[str, str],
    *,
    env: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    raw_spec: bytes | None = None,
    namespace: str = NAMESPACE,
    running: bool = False,
) -> None:
    """Creates one container record, and its running task when `running` (raises
    grpc.RpcError if containerd refuses either)."""
    container = pb.Container(id=id, labels=dict(labels), image="otelgpu-test/busybox:1")
    container.runtime.name = "io.containerd.runc.v2"
    container.runtime.options.type_url = containerd_tasks.RUNC_OPTIONS_TYPE
    container.runtime.options.value = containerd_tasks.runc_options(socket)
    container.spec.type_url = OCI_SPEC_TYPE
    container.spec.value = (
        raw_spec
        if raw_spec is not None
        else _spec(env or {}, annotations or {}, containerd_tasks.cgroup_path(socket, id))
    )
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        create = channel.unary_unary(
            CREATE,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=pb.CreateContainerResponse.FromString,
        )
        create(
            pb.CreateContainerRequest(container=container),
            metadata=(("containerd-namespace", namespace),),
            timeout=10,
        )
    if running:
        containerd_tasks.start_task(socket, id, namespace)


def replace_spec(socket: Path, id: str, raw_spec: bytes, namespace: str = NAMESPACE) -> None:
    """Replaces a container record's OCI spec (Containers/Update); a running task keeps the
    spec it was started with, so a record can read malformed while its container runs."""
    container = pb.Container(id=id)
    container.spec.type_url = OCI_SPEC_TYPE
    container.spec.value = raw_spec
    request = pb.UpdateContainerRequest(container=container)
    request.update_mask.paths.append("spec")
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        update = channel.unary_unary(
            UPDATE,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=pb.UpdateContainerResponse.FromString,
        )
        update(request, metadata=(("containerd-namespace", namespace),), timeout=10)


def stop(socket: Path, id: str, namespace: str = NAMESPACE) -> None:
    """Ends a container's task (SIGKILL) and keeps its record, as the CRI plugin does for an
    exited container or a stopped sandbox until the kubelet removes it."""
    containerd_tasks.stop_task(socket, id, namespace)


def stop_pod(socket: Path, pod: Pod, *containers: str) -> None:
    """A deleted pod as the runtime holds it for a while: its containers and then its
    sandbox stopped, every record still there."""
    for name in containers:
        stop(socket, pod.container_id(name))
    stop(socket, pod.sandbox_id)


# The runc v2 shim runs every task whose spec carries the same value of this annotation in
# one shim process (else it groups by the CRI sandbox-id annotation: one shim per pod, as on
# a real node). A shim costs ~13 MiB; a test planting hundreds of pods can share one.
SHIM_GROUP = "io.containerd.runc.v2.group"


def _group(shim_group: str | None) -> dict[str, str]:
    return {SHIM_GROUP: shim_group} if shim_group else {}


def create_sandbox(
    socket: Path, pod: Pod, *, running: bool = True, shim_group: str | None = None
) -> str:
    """The pod's sandbox, labelled and annotated as the CRI plugin does, ready (its pause
    task running) unless `running` is false; returns its ID. `shim_group`: see
    `SHIM_GROUP`."""
    labels = {
        "io.cri-containerd.kind": "sandbox",
        "io.kubernetes.pod.name": pod.name,
        "io.kubernetes.pod.namespace": pod.namespace,
        "io.kubernetes.pod.uid": pod.uid,
        **pod.labels,
    }
    annotations = {
        "io.kubernetes.cri.container-type": "sandbox",
        "io.kubernetes.cri.sandbox-id": pod.sandbox_id,
        "io.kubernetes.cri.sandbox-name": pod.name,
        "io.kubernetes.cri.sandbox-namespace": pod.namespace,
        **_group(shim_group),
        **pod.annotations,
    }
    create_record(
        socket,
        pod.sandbox_id,
        labels,
        env={"PATH": "/bin"},
        annotations=annotations,
        running=running,
    )
    return pod.sandbox_id


def create_container(
    socket: Path,
    pod: Pod,
    name: str,
    *,
    env: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    running: bool = True,
    shim_group: str | None = None,
) -> str:
    """A workload container of `pod`, as the CRI plugin stores it, running unless `running`
    is false; returns its ID. `shim_group`: see `SHIM_GROUP`."""
    cid = pod.container_id(name)
    all_labels = {
        "io.cri-containerd.kind": "container",
        "io.kubernetes.container.name": name,
        "io.kubernetes.pod.name": pod.name,
        "io.kubernetes.pod.namespace": pod.namespace,
        "io.kubernetes.pod.uid": pod.uid,
        **(labels or {}),
    }
    annotations = {
        "io.kubernetes.cri.container-type": "container",
        "io.kubernetes.cri.container-name": name,
        "io.kubernetes.cri.sandbox-id": pod.sandbox_id,
        "io.kubernetes.cri.sandbox-name": pod.name,
        "io.kubernetes.cri.sandbox-namespace": pod.namespace,
        **_group(shim_group),
    }
    create_record(socket, cid, all_labels, env=env, annotations=annotations, running=running)
    return cid
