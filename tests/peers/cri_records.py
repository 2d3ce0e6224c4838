"""CRI-shaped container records written straight into a real containerd's containers API.

What containerd's CRI plugin would store for a pod: a sandbox (pause) container carrying the
pod's labels, with the pod's annotations in its OCI spec, and workload containers carrying
the kubelet's `io.kubernetes.*` labels, with env and annotations in their OCI specs. No
image, snapshot or task is needed for a record, so this runs on any machine with containerd.
Uses the processor's own generated stubs (`_proto/containers_pb2.py`).
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

pb: Any = importlib.import_module("otelgpu.processors.container_env._proto.containers_pb2")

NAMESPACE = "k8s.io"
OCI_SPEC_TYPE = "types.containerd.io/opencontainers/runtime-spec/1/Spec"
CREATE = "/containerd.services.containers.v1.Containers/Create"


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

    @property
    def sandbox_id(self) -> str:
        return container_id(f"sandbox/{self.namespace}/{self.name}/{self.uid}")

    def container_id(self, container: str) -> str:
        return container_id(f"container/{self.namespace}/{self.name}/{self.uid}/{container}")


def _spec(env: Mapping[str, str], annotations: Mapping[str, str]) -> bytes:
    return json.dumps(
        {
            "ociVersion": "1.0.2-dev",
            "process": {
                "args": ["/pause"],
                "cwd": "/",
                "env": [f"{k}={v}" for k, v in env.items()],
            },
            "annotations": dict(annotations),
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
) -> None:
    """Creates one container record (raises grpc.RpcError if containerd refuses it)."""
    container = pb.Container(id=id, labels=dict(labels), image="otelgpu-test/busybox:1")
    container.runtime.name = "io.containerd.runc.v2"
    container.spec.type_url = OCI_SPEC_TYPE
    container.spec.value = raw_spec if raw_spec is not None else _spec(env or {}, annotations or {})
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


def create_sandbox(socket: Path, pod: Pod) -> str:
    """The pod's sandbox, labelled and annotated as the CRI plugin does; returns its ID."""
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
        **pod.annotations,
    }
    create_record(socket, pod.sandbox_id, labels, env={"PATH": "/bin"}, annotations=annotations)
    return pod.sandbox_id


def create_container(
    socket: Path,
    pod: Pod,
    name: str,
    *,
    env: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> str:
    """A workload container of `pod`, as the CRI plugin stores it; returns its ID."""
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
    }
    create_record(socket, cid, all_labels, env=env, annotations=annotations)
    return cid
