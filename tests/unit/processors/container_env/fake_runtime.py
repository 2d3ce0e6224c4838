"""A `ContainerRuntime` held in memory: containers a test adds (running unless told
otherwise, as a kubelet leaves them), and a switch to take it down."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from otelgpu.processors.container_env.runtime import (
    ContainerRef,
    ContainerSpec,
    RuntimeUnavailable,
    decode_oci_spec,
)


def oci_spec(env: Mapping[str, str] = {}, annotations: Mapping[str, str] = {}) -> bytes:
    """An OCI runtime spec in JSON, as containerd stores it."""
    return json.dumps(
        {
            "ociVersion": "1.0.2",
            "process": {"env": [f"{k}={v}" for k, v in env.items()]},
            "annotations": dict(annotations),
        }
    ).encode()


class FakeRuntime:
    """Serves the containers a test put in; `up = False` makes every call fail."""

    def __init__(self, name: str = "containerd") -> None:
        self._name = name
        self.up = True
        self.refs: dict[str, ContainerRef] = {}
        self.list_calls = 0
        self.spec_calls = 0
        self.closed = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def endpoint(self) -> str:
        return f"/fake/{self._name}.sock"

    def add(
        self,
        id: str,
        labels: Mapping[str, str] = {},
        *,
        env: Mapping[str, str] = {},
        annotations: Mapping[str, str] = {},
        created: float = 1.0,
        revision: str = "1",
        raw_spec: bytes | None = None,
        running: bool = True,
    ) -> None:
        spec = oci_spec(env, annotations) if raw_spec is None else raw_spec
        self.refs[id] = ContainerRef(
            id=id,
            labels=dict(labels),
            revision=revision,
            running=running,
            created=created,
            raw_spec=spec,
        )

    def stop(self, id: str) -> None:
        """The container's task ended; its record stays (as the CRI plugin keeps it)."""
        ref = self.refs[id]
        self.refs[id] = ContainerRef(
            id=ref.id,
            labels=ref.labels,
            revision=ref.revision,
            running=False,
            created=ref.created,
            sandbox_id=ref.sandbox_id,
            raw_spec=ref.raw_spec,
            annotations=ref.annotations,
        )

    def workload(
        self,
        id: str,
        ns: str,
        pod: str,
        container: str,
        *,
        env: Mapping[str, str] = {},
        labels: Mapping[str, str] = {},
        created: float = 1.0,
        sandbox_id: str = "",
        uid: str = "",
        running: bool = True,
    ) -> None:
        """A CRI workload container, labelled as containerd's CRI plugin labels it."""
        annotations = {"io.kubernetes.cri.sandbox-id": sandbox_id} if sandbox_id else {}
        self.add(
            id,
            {
                "io.cri-containerd.kind": "container",
                "io.kubernetes.pod.namespace": ns,
                "io.kubernetes.pod.name": pod,
                "io.kubernetes.container.name": container,
                **({"io.kubernetes.pod.uid": uid} if uid else {}),
                **labels,
            },
            env=env,
            annotations=annotations,
            created=created,
            running=running,
        )

    def sandbox(
        self,
        id: str,
        ns: str,
        pod: str,
        *,
        labels: Mapping[str, str] = {},
        annotations: Mapping[str, str] = {},
        created: float = 1.0,
        uid: str = "",
        running: bool = True,
    ) -> None:
        """A CRI pod sandbox (pause container): pod labels as labels, pod annotations in
        its spec; ready (its pause task running) unless `running` is false."""
        self.add(
            id,
            {
                "io.cri-containerd.kind": "sandbox",
                "io.kubernetes.pod.namespace": ns,
                "io.kubernetes.pod.name": pod,
                **({"io.kubernetes.pod.uid": uid} if uid else {}),
                **labels,
            },
            env={"PAUSE_ENV": "x"},
            annotations={"io.kubernetes.cri.container-type": "sandbox", **annotations},
            created=created,
            running=running,
        )

    async def list_containers(self) -> Sequence[ContainerRef]:
        self.list_calls += 1
        if not self.up:
            raise RuntimeUnavailable("connection refused")
        return list(self.refs.values())

    async def container_spec(self, ref: ContainerRef, *, env: bool) -> ContainerSpec | None:
        self.spec_calls += 1
        if not self.up:
            raise RuntimeUnavailable("connection refused")
        return decode_oci_spec(ref.raw_spec)

    async def close(self) -> None:
        self.closed += 1
